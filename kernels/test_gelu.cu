// test_gelu.cu: kernels/gelu.cuh against gelu_forward_cpu and gelu_backward_cpu, at sizes that
// leave the last block partial, including the in-place forms the engine uses.
#include "gelu.cuh"
#include "kernel_check.cuh"
#include "ops_cpu.h"

static void test_size(size_t n, TestRng& rng) {
    HostTensor x = random_tensor(n, rng, 2.0f);
    HostTensor dy = random_tensor(n, rng);
    std::vector<float> ref_y(n), ref_dx(n, 0.0f);
    gelu_forward_cpu(ref_y.data(), x.f.data(), (int)n);
    gelu_backward_cpu(ref_dx.data(), x.f.data(), dy.f.data(), (int)n);  // accumulates into zeros

    floatX* d_x = device_upload(x.x);
    floatX* d_y = device_alloc<floatX>(n);
    floatX* d_dy = device_upload(dy.x);
    gelu_forward(d_y, d_x, n, 0);
    gelu_backward(d_dy, d_x, d_dy, n, 0);  // in place over dout, as the engine calls it
    char name[96];
    // One rounding of the output.
    snprintf(name, sizeof(name), "gelu_forward n=%zu vs gelu_forward_cpu", n);
    check_tensor(name, device_download_float(d_y, n), ref_y, floatx_tol(1));
    snprintf(name, sizeof(name), "gelu_backward n=%zu (in place) vs gelu_backward_cpu", n);
    check_tensor(name, device_download_float(d_dy, n), ref_dx, floatx_tol(1));

    gelu_forward(d_x, d_x, n, 0);  // in place
    snprintf(name, sizeof(name), "gelu_forward n=%zu in place", n);
    check_tensor(name, device_download_float(d_x, n), ref_y, floatx_tol(1));
    cudaCheck(cudaFree(d_x));
    cudaCheck(cudaFree(d_y));
    cudaCheck(cudaFree(d_dy));
}

int main() {
    TestRng rng(1);
    printf("precision %s\n", PRECISION_NAME);
    test_size(1, rng);
    test_size(1000, rng);
    test_size(4 * 3 * 64 * 4, rng);
    return test_finish();
}
