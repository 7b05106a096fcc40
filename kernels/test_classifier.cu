// test_classifier.cu: kernels/classifier.cuh against softmax_forward_cpu, crossentropy_forward_cpu
// and crossentropy_softmax_backward_cpu: V not a multiple of anything (V = 1000 of Vp = 1024,
// GPT-2's 50257 of 50304), an odd Vp (the scalar path), N = 1, padding columns holding huge
// values (they must be ignored), targets 0 and V-1, logits around 0 and around 30 (the fast
// exponential's error grows with the row's max), write_dlogits 0 and 1, and the mean loss the last
// block adds against a double sum of the kernel's losses (up to 3000 rows: several per thread), twice
// in a row (the counter it elects that block with must come back to 0).
#include <math.h>

#include "classifier.cuh"
#include "kernel_check.cuh"
#include "ops_cpu.h"

#if defined(ENABLE_FP16)
static const float PAD_VALUE = 30000.0f;  // near fp16's max: it would swamp any sum that read it
static const float LOSS_SCALE = 65536.0f; // fp16 training scales the loss; dlogits carry the scale
#else
static const float PAD_VALUE = 1e30f;
static const float LOSS_SCALE = 1.0f;
#endif

// The fast exponential's error beyond the tolerance rule's roundings (classifier.cuh derives it;
// u = 2^-24): a probability is off by at most (2 (4 + M) + 1.5 (R + ln V)) u relative, M the largest
// |row max|, R the largest |x - row max|, and a loss by at most (4 + M + 1.5 ln V) u absolute.
static const double EXP_U = 1.0 / (1 << 24);

static void test_case(int N, int V, int Vp, TestRng& rng, float offset = 0.0f) {
    const size_t NV = (size_t)N * Vp;
    HostTensor logits = random_tensor(NV, rng, 2.0f, offset);
    for (int i = 0; i < N; i++)
        for (int v = V; v < Vp; v++) {
            logits.x[(size_t)i * Vp + v] = (floatX)PAD_VALUE;
            logits.f[(size_t)i * Vp + v] = (float)(floatX)PAD_VALUE;  // the reference must ignore it too
        }
    std::vector<int> targets(N);
    for (int i = 0; i < N; i++) targets[i] = i == 0 ? V - 1 : i == 1 ? 0 : rng.below(V);
    // One row's share of the objective, as the engine passes it (B*T rows, 4 micro-steps).
    const float dloss = LOSS_SCALE / (N * 4.0f);

    std::vector<float> probs(NV), ref_losses(N), ref_dlogits(NV, 0.0f);
    softmax_forward_cpu(probs.data(), logits.f.data(), N, V, Vp);
    crossentropy_forward_cpu(ref_losses.data(), probs.data(), targets.data(), N, Vp);
    crossentropy_softmax_backward_cpu(ref_dlogits.data(), probs.data(), targets.data(), dloss, N, V, Vp);
    // The exponential's share of the tolerances (see EXP_U): each dlogit's error is within that
    // relative bound times p dloss, so the norm's within it times ||p|| / ||p - y||.
    double M = 0, R = 0, ms = 0, p2 = 0, g2 = 0;  // ms: the losses' mean square
    for (size_t j = 0; j < NV; j++) {
        p2 += (double)probs[j] * probs[j] * dloss * dloss;
        g2 += (double)ref_dlogits[j] * ref_dlogits[j];
    }
    for (int i = 0; i < N; i++) {
        float m = -INFINITY;
        for (int v = 0; v < V; v++) m = fmaxf(m, logits.f[(size_t)i * Vp + v]);
        for (int v = 0; v < V; v++) R = fmax(R, fabs((double)logits.f[(size_t)i * Vp + v] - m));
        M = fmax(M, fabs((double)m));
        ms += (double)ref_losses[i] * ref_losses[i] / N;
    }
    const double loss_tol = floatx_tol(0) + (4 + M + 1.5 * log((double)V)) * EXP_U / sqrt(ms);
    const double dlogits_tol = floatx_tol(1) + (2 * (4 + M) + 1.5 * (R + log((double)V))) * EXP_U * sqrt(p2 / g2);

    floatX* d_logits = device_upload(logits.x);
    float* d_losses = device_alloc<float>(N);
    int* d_targets = device_upload(targets);
    const char* path = Vp % X128 == 0 ? "128-bit" : "scalar";
    char name[160];

    // Losses only: the logits stay as they were, bit for bit. No mean loss asked for.
    fused_classifier(d_logits, d_losses, d_targets, dloss, N, V, Vp, 0, NULL, 0.0f, NULL, 0);
    // Losses are fp32 results from floatX inputs: no floatX rounding (k = 0, the fp32 floor), plus
    // the fast exponential's bound.
    snprintf(name, sizeof(name), "fused_classifier N=%d V=%d Vp=%d max~%.0f (%s) losses vs crossentropy_forward_cpu", N,
             V, Vp, offset, path);
    std::vector<float> got_losses = device_download_float(d_losses, N);
    check_tensor(name, got_losses, ref_losses, loss_tol);
    snprintf(name, sizeof(name), "fused_classifier N=%d V=%d Vp=%d write_dlogits=0 leaves the logits", N, V, Vp);
    CHECK(device_download_float(d_logits, NV) == logits.f, name);

    // Losses and the gradient in place.
    float* d_acc = device_upload(std::vector<float>{0.0f});
    unsigned* d_counter = device_alloc<unsigned>(1);
    cudaCheck(cudaMemset(d_counter, 0, sizeof(unsigned)));
    fused_classifier(d_logits, d_losses, d_targets, dloss, N, V, Vp, 1, d_acc, 1.0f, d_counter, 0);
    snprintf(name, sizeof(name), "fused_classifier N=%d V=%d Vp=%d write_dlogits=1: same losses", N, V, Vp);
    CHECK(device_download_float(d_losses, N) == got_losses, name);
    // (p - y) * dloss in fp32, stored once as floatX: one rounding, plus the fast exponential's
    // bound. Padding must be exactly 0.
    std::vector<float> got_dlogits = device_download_float(d_logits, NV);
    snprintf(name, sizeof(name), "fused_classifier N=%d V=%d Vp=%d max~%.0f (%s) dlogits vs crossentropy_softmax_backward_cpu",
             N, V, Vp, offset, path);
    check_tensor(name, got_dlogits, ref_dlogits, dlogits_tol);
    bool pad_zero = true;
    for (int i = 0; i < N; i++)
        for (int v = V; v < Vp; v++) pad_zero = pad_zero && got_dlogits[(size_t)i * Vp + v] == 0.0f;
    snprintf(name, sizeof(name), "fused_classifier N=%d V=%d Vp=%d padding gradient is 0", N, V, Vp);
    CHECK(pad_zero, name);

    // Deterministic: again from the same logits, the same bits.
    cudaCheck(cudaMemcpy(d_logits, logits.x.data(), NV * sizeof(floatX), cudaMemcpyHostToDevice));
    std::vector<float> got_acc = device_download_float(d_acc, 1);
    cudaCheck(cudaMemset(d_acc, 0, sizeof(float)));
    fused_classifier(d_logits, d_losses, d_targets, dloss, N, V, Vp, 1, d_acc, 1.0f, d_counter, 0);
    snprintf(name, sizeof(name), "fused_classifier N=%d V=%d Vp=%d twice: bit-identical", N, V, Vp);
    CHECK(device_download_float(d_logits, NV) == got_dlogits && device_download_float(d_losses, N) == got_losses &&
              device_download_float(d_acc, 1) == got_acc,
          name);
    cudaCheck(cudaFree(d_acc));
    cudaCheck(cudaFree(d_counter));

    cudaCheck(cudaFree(d_logits));
    cudaCheck(cudaFree(d_losses));
    cudaCheck(cudaFree(d_targets));
}

// The mean loss: N rows of a small vocabulary (the losses are the kernel's own), added twice to a
// start value with a weight, against a double sum of the losses it wrote.
static void test_mean_loss(int N, TestRng& rng) {
    const int V = 5, Vp = 8;
    HostTensor logits = random_tensor((size_t)N * Vp, rng, 2.0f, 0.0f);
    std::vector<int> targets(N);
    for (int i = 0; i < N; i++) targets[i] = rng.below(V);
    const float weight = 0.25f, start = 1.5f;
    floatX* d_logits = device_upload(logits.x);
    float* d_losses = device_alloc<float>(N);
    int* d_targets = device_upload(targets);
    float* d_acc = device_upload(std::vector<float>{start});
    unsigned* d_counter = device_alloc<unsigned>(1);
    cudaCheck(cudaMemset(d_counter, 0, sizeof(unsigned)));

    fused_classifier(d_logits, d_losses, d_targets, 0.0f, N, V, Vp, 0, d_acc, weight, d_counter, 0);
    std::vector<float> losses = device_download_float(d_losses, N), got = device_download_float(d_acc, 1);
    double sum = 0.0;
    for (int i = 0; i < N; i++) sum += losses[i];
    char name[96];
    // fp32 throughout: the 1e-5 floor.
    snprintf(name, sizeof(name), "fused_classifier N=%d mean loss vs a double sum of its losses", N);
    check_tensor(name, got, std::vector<float>{(float)(start + weight * sum / N)}, floatx_tol(0));
    snprintf(name, sizeof(name), "fused_classifier N=%d leaves its counter 0", N);
    CHECK(device_download_float(d_counter, 1)[0] == 0.0f, name);
    // A second launch adds again (a counter left non-zero would elect no block: nothing added).
    fused_classifier(d_logits, d_losses, d_targets, 0.0f, N, V, Vp, 0, d_acc, weight, d_counter, 0);
    snprintf(name, sizeof(name), "fused_classifier N=%d mean loss added again by a second launch", N);
    check_tensor(name, device_download_float(d_acc, 1), std::vector<float>{(float)(start + 2 * weight * sum / N)},
                 floatx_tol(0));
    // Deterministic: from the same start, the same bits.
    cudaCheck(cudaMemcpy(d_acc, &start, sizeof(float), cudaMemcpyHostToDevice));
    fused_classifier(d_logits, d_losses, d_targets, 0.0f, N, V, Vp, 0, d_acc, weight, d_counter, 0);
    snprintf(name, sizeof(name), "fused_classifier N=%d mean loss twice: bit-identical", N);
    CHECK(device_download_float(d_acc, 1) == got, name);
    cudaCheck(cudaFree(d_logits));
    cudaCheck(cudaFree(d_losses));
    cudaCheck(cudaFree(d_targets));
    cudaCheck(cudaFree(d_acc));
    cudaCheck(cudaFree(d_counter));
}

int main() {
    TestRng rng(4);
    printf("precision %s\n", PRECISION_NAME);
    test_case(1, 1000, 1024, rng);    // N = 1 (its target is V-1)
    test_case(4, 1000, 1024, rng);    // targets V-1, 0, random
    test_case(3, 999, 1001, rng);     // odd Vp: scalar path in every precision
    test_case(3, 5, 8, rng);          // tiny V: most threads have nothing
    test_case(4, 1000, 1024, rng, 30.0f);  // logits around 30: the exponential's argument rounding grows with it
    test_case(3, 50257, 50304, rng);  // GPT-2's vocabulary
    test_mean_loss(1, rng);
    test_mean_loss(1000, rng);
    test_mean_loss(3000, rng);  // several losses per thread
    return test_finish();
}
