/* The GPU device interface in a build without CUDA (the Makefile leaves
 * this file out under CUDA=1, where src/cuda/ provides it). */
#include "gpu.h"

const bg_gpu_api *bg_gpu_api_get(void) { return NULL; }
