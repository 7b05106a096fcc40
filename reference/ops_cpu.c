// ops_cpu.c: the C reference engine's layers (see ops_cpu.h for the conventions).
#include "ops_cpu.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_cpu.h"

#define CHANNEL_CHUNK 64  // columns a thread owns when reducing over rows

void encoder_forward_cpu(float* out, const int* inp, const float* wte, const float* wpe, int B, int T, int C) {
#pragma omp parallel for
    for (long bt = 0; bt < (long)B * T; bt++) {
        const float* te = wte + (long)inp[bt] * C;
        const float* pe = wpe + (bt % T) * C;
        float* o = out + bt * C;
        for (int c = 0; c < C; c++) o[c] = te[c] + pe[c];
    }
}

void encoder_backward_cpu(float* dwte, float* dwpe, const float* dout, const int* inp, int B, int T, int C) {
    // Threads own column chunks, so two positions with the same token never race.
#pragma omp parallel for
    for (int c0 = 0; c0 < C; c0 += CHANNEL_CHUNK) {
        int c1 = c0 + CHANNEL_CHUNK < C ? c0 + CHANNEL_CHUNK : C;
        for (long bt = 0; bt < (long)B * T; bt++) {
            const float* d = dout + bt * C;
            float* dte = dwte + (long)inp[bt] * C;
            float* dpe = dwpe + (bt % T) * C;
            for (int c = c0; c < c1; c++) {
                dte[c] += d[c];
                dpe[c] += d[c];
            }
        }
    }
}

void layernorm_forward_cpu(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                           const float* bias, int N, int C) {
    const float eps = 1e-5f;
#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        const float* x = inp + (long)i * C;
        float m = 0.0f;
        for (int c = 0; c < C; c++) m += x[c];
        m /= C;
        float var = 0.0f;
        for (int c = 0; c < C; c++) {
            float d = x[c] - m;
            var += d * d;
        }
        var /= C;
        float s = 1.0f / sqrtf(var + eps);
        float* o = out + (long)i * C;
        for (int c = 0; c < C; c++) o[c] = (x[c] - m) * s * weight[c] + bias[c];
        mean[i] = m;
        rstd[i] = s;
    }
}

void layernorm_backward_cpu(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                            const float* weight, const float* mean, const float* rstd, int N, int C) {
#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        const float* d = dout + (long)i * C;
        const float* x = inp + (long)i * C;
        float m = mean[i], s = rstd[i];
        // dnorm = dout * weight; dx = rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm))
        float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
        for (int c = 0; c < C; c++) {
            float norm = (x[c] - m) * s;
            float dnorm = weight[c] * d[c];
            dnorm_mean += dnorm;
            dnorm_norm_mean += dnorm * norm;
        }
        dnorm_mean /= C;
        dnorm_norm_mean /= C;
        float* dx = dinp + (long)i * C;
        for (int c = 0; c < C; c++) {
            float norm = (x[c] - m) * s;
            float dnorm = weight[c] * d[c];
            dx[c] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * s;
        }
    }
#pragma omp parallel for
    for (int c0 = 0; c0 < C; c0 += CHANNEL_CHUNK) {
        int c1 = c0 + CHANNEL_CHUNK < C ? c0 + CHANNEL_CHUNK : C;
        for (int i = 0; i < N; i++) {
            const float* d = dout + (long)i * C;
            const float* x = inp + (long)i * C;
            float m = mean[i], s = rstd[i];
            for (int c = c0; c < c1; c++) {
                dbias[c] += d[c];
                dweight[c] += (x[c] - m) * s * d[c];
            }
        }
    }
}

void matmul_forward_cpu(float* out, const float* inp, const float* weight, const float* bias, int N, int C, int OC) {
    gemm_cpu(N, OC, C, inp, C, 0, weight, C, 1, out, OC, 0);
    if (bias) {
#pragma omp parallel for
        for (int i = 0; i < N; i++) {
            float* o = out + (long)i * OC;
            for (int j = 0; j < OC; j++) o[j] += bias[j];
        }
    }
}

void matmul_backward_cpu(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                         const float* weight, int N, int C, int OC) {
    gemm_cpu(N, C, OC, dout, OC, 0, weight, C, 0, dinp, C, 1);    // dinp += dout . W
    gemm_cpu(OC, C, N, dout, OC, 1, inp, C, 0, dweight, C, 1);    // dW += dout^T . inp
    if (dbias) {
#pragma omp parallel for
        for (int j0 = 0; j0 < OC; j0 += CHANNEL_CHUNK) {
            int j1 = j0 + CHANNEL_CHUNK < OC ? j0 + CHANNEL_CHUNK : OC;
            for (int i = 0; i < N; i++) {
                const float* d = dout + (long)i * OC;
                for (int j = j0; j < j1; j++) dbias[j] += d[j];
            }
        }
    }
}

void attention_forward_cpu(float* out, float* att, const float* inp, int B, int T, int C, int NH) {
    int HS = C / NH;
    int C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)HS);
#pragma omp parallel for collapse(3)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            for (int t = 0; t < T; t++) {
                const float* q = inp + ((long)b * T + t) * C3 + h * HS;
                float* a = att + (((long)b * NH + h) * T + t) * T;
                float maxv = -INFINITY;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float* k = inp + ((long)b * T + t2) * C3 + C + h * HS;
                    float dot = 0.0f;
                    for (int i = 0; i < HS; i++) dot += q[i] * k[i];
                    dot *= scale;
                    a[t2] = dot;
                    if (dot > maxv) maxv = dot;
                }
                float sum = 0.0f;
                for (int t2 = 0; t2 <= t; t2++) {
                    float e = expf(a[t2] - maxv);
                    a[t2] = e;
                    sum += e;
                }
                float inv = 1.0f / sum;
                for (int t2 = 0; t2 <= t; t2++) a[t2] *= inv;
                for (int t2 = t + 1; t2 < T; t2++) a[t2] = 0.0f;
                float* o = out + ((long)b * T + t) * C + h * HS;
                for (int i = 0; i < HS; i++) o[i] = 0.0f;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float* v = inp + ((long)b * T + t2) * C3 + 2 * C + h * HS;
                    float p = a[t2];
                    for (int i = 0; i < HS; i++) o[i] += p * v[i];
                }
            }
        }
    }
}

void attention_backward_cpu(float* dinp, const float* dout, const float* inp, const float* att, int B, int T,
                            int C, int NH) {
    int HS = C / NH;
    int C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)HS);
    // One (b, h) per task: it alone writes its slices of dq, dk, dv, in a fixed order.
#pragma omp parallel
    {
        float dpre[T];  // per thread; T <= 1024 keeps it a few KB of stack
#pragma omp for collapse(2)
        for (int b = 0; b < B; b++) {
            for (int h = 0; h < NH; h++) {
                for (int t = 0; t < T; t++) {
                    const float* a = att + (((long)b * NH + h) * T + t) * T;
                    const float* d = dout + ((long)b * T + t) * C + h * HS;
                    const float* q = inp + ((long)b * T + t) * C3 + h * HS;
                    float* dq = dinp + ((long)b * T + t) * C3 + h * HS;
                    // datt[t2] = d . v[t2]; dpre = a * (datt - sum(a * datt))
                    float dot_sum = 0.0f;
                    for (int t2 = 0; t2 <= t; t2++) {
                        const float* v = inp + ((long)b * T + t2) * C3 + 2 * C + h * HS;
                        float datt = 0.0f;
                        for (int i = 0; i < HS; i++) datt += d[i] * v[i];
                        dpre[t2] = datt;
                        dot_sum += a[t2] * datt;
                    }
                    for (int t2 = 0; t2 <= t; t2++) {
                        const float* k = inp + ((long)b * T + t2) * C3 + C + h * HS;
                        float* dk = dinp + ((long)b * T + t2) * C3 + C + h * HS;
                        float* dv = dinp + ((long)b * T + t2) * C3 + 2 * C + h * HS;
                        float g = a[t2] * (dpre[t2] - dot_sum) * scale;
                        float p = a[t2];
                        for (int i = 0; i < HS; i++) {
                            dq[i] += g * k[i];
                            dk[i] += g * q[i];
                            dv[i] += p * d[i];
                        }
                    }
                }
            }
        }
    }
}

#define GELU_SCALE 0.7978845608028654f  // sqrt(2 / pi)

void gelu_forward_cpu(float* out, const float* inp, int N) {
#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        float x = inp[i];
        float cube = 0.044715f * x * x * x;
        out[i] = 0.5f * x * (1.0f + tanhf(GELU_SCALE * (x + cube)));
    }
}

void gelu_backward_cpu(float* dinp, const float* inp, const float* dout, int N) {
#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        float x = inp[i];
        float cube = 0.044715f * x * x * x;
        float tanh_arg = GELU_SCALE * (x + cube);
        float tanh_out = tanhf(tanh_arg);
        float sech2 = 1.0f - tanh_out * tanh_out;
        float local = 0.5f * (1.0f + tanh_out) + x * 0.5f * sech2 * GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] += local * dout[i];
    }
}

void residual_forward_cpu(float* out, const float* a, const float* b, int N) {
#pragma omp parallel for
    for (int i = 0; i < N; i++) out[i] = a[i] + b[i];
}

void residual_backward_cpu(float* da, float* db, const float* dout, int N) {
#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        da[i] += dout[i];
        db[i] += dout[i];
    }
}

void softmax_forward_cpu(float* probs, const float* logits, int N, int V, int Vp) {
#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        const float* x = logits + (long)i * Vp;
        float* p = probs + (long)i * Vp;
        float maxv = -INFINITY;
        for (int j = 0; j < V; j++) maxv = x[j] > maxv ? x[j] : maxv;
        double sum = 0.0;  // 50k terms: a double sum keeps the reference's loss exact to fp32
        for (int j = 0; j < V; j++) {
            p[j] = expf(x[j] - maxv);
            sum += p[j];
        }
        float inv = (float)(1.0 / sum);
        for (int j = 0; j < V; j++) p[j] *= inv;
        for (int j = V; j < Vp; j++) p[j] = 0.0f;
    }
}

void crossentropy_forward_cpu(float* losses, const float* probs, const int* targets, int N, int Vp) {
    for (int i = 0; i < N; i++) losses[i] = -logf(probs[(long)i * Vp + targets[i]]);
}

void crossentropy_softmax_backward_cpu(float* dlogits, const float* probs, const int* targets, float dloss, int N,
                                       int V, int Vp) {
#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        float* dl = dlogits + (long)i * Vp;
        const float* p = probs + (long)i * Vp;
        for (int j = 0; j < V; j++) dl[j] += p[j] * dloss;
        dl[targets[i]] -= dloss;
    }
}

void adamw_update_cpu(float* params, const float* grads, float* m, float* v, size_t n, float lr, float beta1,
                      float beta2, float bc1, float bc2, float eps, float weight_decay, float grad_scale) {
#pragma omp parallel for
    for (size_t i = 0; i < n; i++) {
        float grad = grads[i] * grad_scale;
        float mi = beta1 * m[i] + (1.0f - beta1) * grad;
        float vi = beta2 * v[i] + (1.0f - beta2) * grad * grad;
        m[i] = mi;
        v[i] = vi;
        float mhat = mi / bc1, vhat = vi / bc2;
        params[i] -= lr * (mhat / (sqrtf(vhat) + eps) + weight_decay * params[i]);
    }
}
