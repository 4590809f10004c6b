// See cuda_runtime.h: the emulation declares the bfloat16 type there.
#pragma once
#include "cuda_runtime.h"
