// ops_cpu.h: the C reference engine's layers, fp32, forward and backward.
//
// Every CUDA kernel in kernels/ is tested against the function here that it must equal.
// Conventions (llm.c's CPU ones): tensors are row-major, N = B*T rows; backward functions
// ACCUMULATE (+=) into their gradient outputs, and the engine zeroes gradient buffers first.
// All loops split work so that each output element is summed in one fixed order, whatever
// the thread count: results are bit-reproducible.
#ifndef REFERENCE_OPS_CPU_H
#define REFERENCE_OPS_CPU_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// out[b,t,:] = wte[inp[b,t],:] + wpe[t,:]
void encoder_forward_cpu(float* out, const int* inp, const float* wte, const float* wpe, int B, int T, int C);
void encoder_backward_cpu(float* dwte, float* dwpe, const float* dout, const int* inp, int B, int T, int C);

// Per row of C: out = (x - mean) * rstd * weight + bias, eps 1e-5; saves mean and rstd for backward.
void layernorm_forward_cpu(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                           const float* bias, int N, int C);
void layernorm_backward_cpu(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                            const float* weight, const float* mean, const float* rstd, int N, int C);

// out[N,OC] = inp[N,C] . weight[OC,C]^T + bias (bias may be NULL)
void matmul_forward_cpu(float* out, const float* inp, const float* weight, const float* bias, int N, int C, int OC);
void matmul_backward_cpu(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                         const float* weight, int N, int C, int OC);

// Causal self-attention. inp is qkv [B,T,3C] (q, k, v each C = NH heads of HS); out [B,T,C];
// att [B,NH,T,T] keeps the softmax probabilities for backward (entries above the diagonal are 0).
void attention_forward_cpu(float* out, float* att, const float* inp, int B, int T, int C, int NH);
void attention_backward_cpu(float* dinp, const float* dout, const float* inp, const float* att, int B, int T,
                            int C, int NH);

// GELU, tanh approximation (GPT-2's).
void gelu_forward_cpu(float* out, const float* inp, int N);
void gelu_backward_cpu(float* dinp, const float* inp, const float* dout, int N);

void residual_forward_cpu(float* out, const float* a, const float* b, int N);
void residual_backward_cpu(float* da, float* db, const float* dout, int N);

// Softmax over the first V of each row of Vp logits; the padding columns get probability 0.
void softmax_forward_cpu(float* probs, const float* logits, int N, int V, int Vp);
// losses[i] = -log probs[i, targets[i]]
void crossentropy_forward_cpu(float* losses, const float* probs, const int* targets, int N, int Vp);
// dlogits[i,:] += (probs[i,:] - onehot(targets[i])) * dloss, over the first V columns only.
void crossentropy_softmax_backward_cpu(float* dlogits, const float* probs, const int* targets, float dloss, int N,
                                       int V, int Vp);

// One AdamW step over n entries, PyTorch's rule with decoupled weight decay:
//   g = grad * grad_scale; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
//   p -= lr * ((m / bc1) / (sqrt(v / bc2) + eps) + weight_decay * p)
// bc1 = 1 - b1^t and bc2 = 1 - b2^t are the bias corrections of step t (from 1); grad_scale
// carries the clipping factor (and, on the GPU, the inverse loss scale).
void adamw_update_cpu(float* params, const float* grads, float* m, float* v, size_t n, float lr, float beta1,
                      float beta2, float bc1, float bc2, float eps, float weight_decay, float grad_scale);

#ifdef __cplusplus
}
#endif
#endif
