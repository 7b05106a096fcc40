// test_gelu.cu: kernels/gelu.cuh against gelu_forward_cpu and gelu_backward_cpu, at sizes that
// leave the last block partial and that are not whole 128-bit packs (the tail elements), on
// 16-byte aligned tensors (the vector path) and on tensors one element past alignment (the scalar
// path), including the in-place forms the engine uses.
#include "gelu.cuh"
#include "kernel_check.cuh"
#include "ops_cpu.h"

// offset: elements the tensors start past a cudaMalloc base (which is 256-byte aligned); a
// nonzero offset makes every pointer misaligned for a 128-bit pack.
static void test_size(size_t n, size_t offset, TestRng& rng) {
    HostTensor x = random_tensor(n, rng, 2.0f);
    HostTensor dy = random_tensor(n, rng);
    std::vector<float> ref_y(n), ref_dx(n, 0.0f);
    gelu_forward_cpu(ref_y.data(), x.f.data(), (int)n);
    gelu_backward_cpu(ref_dx.data(), x.f.data(), dy.f.data(), (int)n);  // accumulates into zeros

    floatX* base_x = device_alloc<floatX>(n + offset);
    floatX* base_y = device_alloc<floatX>(n + offset);
    floatX* base_dy = device_alloc<floatX>(n + offset);
    floatX *d_x = base_x + offset, *d_y = base_y + offset, *d_dy = base_dy + offset;
    cudaCheck(cudaMemcpy(d_x, x.x.data(), n * sizeof(floatX), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(d_dy, dy.x.data(), n * sizeof(floatX), cudaMemcpyHostToDevice));
    gelu_forward(d_y, d_x, n, 0);
    gelu_backward(d_dy, d_x, d_dy, n, 0);  // in place over dout, as the engine calls it
    char name[128];
    const char* path = offset ? "scalar" : "128-bit";
    // One rounding of the output.
    snprintf(name, sizeof(name), "gelu_forward n=%zu (%s) vs gelu_forward_cpu", n, path);
    check_tensor(name, device_download_float(d_y, n), ref_y, floatx_tol(1));
    snprintf(name, sizeof(name), "gelu_backward n=%zu (%s, in place) vs gelu_backward_cpu", n, path);
    check_tensor(name, device_download_float(d_dy, n), ref_dx, floatx_tol(1));

    gelu_forward(d_x, d_x, n, 0);  // in place
    snprintf(name, sizeof(name), "gelu_forward n=%zu (%s) in place", n, path);
    check_tensor(name, device_download_float(d_x, n), ref_y, floatx_tol(1));
    cudaCheck(cudaFree(base_x));
    cudaCheck(cudaFree(base_y));
    cudaCheck(cudaFree(base_dy));
}

int main() {
    TestRng rng(1);
    printf("precision %s\n", PRECISION_NAME);
    // 1 and 7: only tail elements; 1003 and 4*3*64*4 + 5: packs and a tail; 4*3*64*4: packs only.
    const size_t sizes[] = {1, 7, 1000, 1003, 4 * 3 * 64 * 4, 4 * 3 * 64 * 4 + 5};
    for (size_t n : sizes) {
        test_size(n, 0, rng);
        test_size(n, 1, rng);
    }
    return test_finish();
}
