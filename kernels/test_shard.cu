// test_shard.cu: kernels/shard.cuh against plain loops: fp32 accumulation of floatX slices over
// three micro-steps (exact: the same fp32 additions in the same order), then one rounding.
#include "kernel_check.cuh"
#include "shard.cuh"

static void test_size(size_t n, TestRng& rng) {
    std::vector<float> ref(n, 0.5f);  // a nonzero start: the kernel must add, not overwrite
    float* d_acc = device_upload(ref);
    floatX* d_g = device_alloc<floatX>(n);
    for (int step = 0; step < 3; step++) {
        HostTensor g = random_tensor(n, rng, 3.0f);
        cudaCheck(cudaMemcpy(d_g, g.x.data(), n * sizeof(floatX), cudaMemcpyHostToDevice));
        shard_accumulate(d_acc, d_g, n, 0);
        for (size_t i = 0; i < n; i++) ref[i] += g.f[i];
    }
    std::vector<float> acc = device_download_float(d_acc, n);
    char name[96];
    snprintf(name, sizeof(name), "shard_accumulate n=%zu: fp32 sums exact", n);
    CHECK(acc == ref, name);
    floatX* d_out = device_alloc<floatX>(n);
    shard_round(d_out, d_acc, n, 0);
    std::vector<float> out = device_download_float(d_out, n), expect(n);
    for (size_t i = 0; i < n; i++) expect[i] = (float)(floatX)ref[i];
    snprintf(name, sizeof(name), "shard_round n=%zu: one rounding to floatX", n);
    CHECK(out == expect, name);
    cudaCheck(cudaFree(d_acc));
    cudaCheck(cudaFree(d_g));
    cudaCheck(cudaFree(d_out));
}

int main() {
    TestRng rng(3);
    printf("precision %s\n", PRECISION_NAME);
    test_size(1, rng);
    test_size(1000, rng);
    return test_finish();
}
