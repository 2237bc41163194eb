// rt_ref.h — the reference kernels the runtime's fast ones are tested
// against: plain loops, double accumulation, libm.  Test-only (not shipped
// in runtime/blockc_rt.c); the contracts are those of blockc_rt.h.
#ifndef RT_REF_H
#define RT_REF_H
void bcrt_ref_bias_act(int n, int d, const float *bias, int act, float *y);
void bcrt_ref_layernorm(int n, int d, const float *x, const float *w, const float *b,
                        float eps, float *y);
void bcrt_ref_softmax(int n, int d, int ld, int causal, int row0, float *s);

/* rms != 0: RMSNorm (db unused). */
void bcrt_ref_norm_bwd(int n, int d, int rms, const float *x, const float *w, float eps,
                       const float *dy, float *dx, float *dw, float *db);
void bcrt_ref_act_bwd(int n, int d, int act, const float *h, float *g);
void bcrt_ref_softmax_bwd(int n, int d, int ld, const float *p, float *dp);
void bcrt_ref_glu_bwd(int n, int d, int act, const float *u, const float *g, float *da,
                      float *dg);
#endif
