// See cuda_runtime.h: the emulation declares the half type there.
#pragma once
#include "cuda_runtime.h"
