// The card's memory bandwidth as a device-to-device copy sees it (bytes
// read plus bytes written per second), for gpu-check.sh's "share of the
// bandwidth limit": prints GB/s (1e9 bytes) on one line.
//   nvcc -O2 -o membw scripts/membw.cu && ./membw
#include <cstdio>
#include <cuda_runtime.h>

int main()
{
    const size_t bytes = (size_t)2 << 30; // 2 GiB each way
    void *a = nullptr, *b = nullptr;
    cudaEvent_t t0, t1;
    if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess ||
        cudaMemset(a, 1, bytes) != cudaSuccess || cudaEventCreate(&t0) != cudaSuccess ||
        cudaEventCreate(&t1) != cudaSuccess) {
        fprintf(stderr, "membw: %s\n", cudaGetErrorString(cudaGetLastError()));
        return 1;
    }
    const int reps = 10;
    cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice); // warm up
    cudaEventRecord(t0);
    for (int i = 0; i < reps; i++)
        cudaMemcpy(i % 2 ? a : b, i % 2 ? b : a, bytes, cudaMemcpyDeviceToDevice);
    cudaEventRecord(t1);
    cudaEventSynchronize(t1);
    float ms = 0;
    cudaEventElapsedTime(&ms, t0, t1);
    if (cudaGetLastError() != cudaSuccess || ms <= 0) {
        fprintf(stderr, "membw: the copies failed\n");
        return 1;
    }
    printf("%.1f\n", 2.0 * bytes * reps / (ms / 1e3) / 1e9);
    return 0;
}
