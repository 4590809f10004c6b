# brigade: plain Makefile. `make` builds build/brigade and build/libbrigade.a;
# `make test` builds and runs every test (the oracle is installed on first use);
# `make fuzz` builds the GGUF parser fuzzer (clang, libFuzzer, ASan/UBSan).

CC      ?= cc
OPT     ?= -O2
PKGS    := jansson libpcre2-8 libmicrohttpd
BUILD   := build
ORACLE  ?= .oracle

PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS))
PKG_LIBS   := $(shell pkg-config --libs $(PKGS))

# -ffp-contract=off: reference kernels must round exactly like ggml's plain C.
BASE_CFLAGS := -std=c11 -Wall -Wextra -Werror -g $(OPT) -ffp-contract=off \
               -D_DEFAULT_SOURCE -D_FILE_OFFSET_BITS=64 -Iinclude -Isrc $(PKG_CFLAGS)
ALL_CFLAGS  := $(BASE_CFLAGS) $(CFLAGS)
LIBS         = $(PKG_LIBS) $(LIBS_CUDA) -lm -lpthread

LIB_SRC  := $(wildcard src/*.c src/models/*.c)
APP_SRC  := $(wildcard app/*.c)

# make CUDA=1: the CUDA backend (src/cuda/*.cu, nvcc) replaces the stub
# src/gpu_stub.c; nothing else changes, and without CUDA=1 nothing of CUDA
# is needed. CUDA_ARCHS narrows the targets (e.g. CUDA_ARCHS=90 for one
# card; 75 builds for Turing cards, without the tensor-core kernels); the
# default is sm_80, sm_86, sm_89, sm_90 and PTX for newer cards.
CUDA      ?=
ifeq ($(CUDA),1)
CUDA_HOME  ?= /usr/local/cuda
NVCC       ?= $(CUDA_HOME)/bin/nvcc
CUDA_ARCHS ?= 80 86 89 90
# Ampere's and Ada's other cards (sm_86, sm_87, sm_89) take machine code
# from sm_80's PTX: the kernels ask only for sm_80 or sm_90 features
# (__CUDA_ARCH__ >= 800, >= 900), and the front end then runs once for the
# three instead of three times (a minute less per large file on 2 cores).
cuda_virtual = $(if $(filter 86 87 89,$(1)),80,$(1))
CUDA_PTX   ?= $(call cuda_virtual,$(lastword $(CUDA_ARCHS)))
CUDA_GENCODE := $(foreach a,$(CUDA_ARCHS),-gencode arch=compute_$(call cuda_virtual,$(a)),code=sm_$(a)) \
                -gencode arch=compute_$(CUDA_PTX),code=compute_$(CUDA_PTX)
# -fmad=false: each float operation rounds on its own, as in the host
# reference and the emulated tests (built with -ffp-contract=off); a fused
# multiply-add is written as fmaf where the CPU's arithmetic has one.
NVCC_FLAGS := -std=c++17 -O3 -fmad=false $(CUDA_GENCODE) -Isrc -Iinclude --Werror all-warnings \
              -Xcompiler -Wall,-Wextra,-Werror -DBG_CUDA_ARCHS='"$(CUDA_ARCHS)"' $(NVCCFLAGS)
LIB_SRC    := $(filter-out src/gpu_stub.c,$(LIB_SRC))
CUDA_SRC   := $(wildcard src/cuda/*.cu)
CUDA_OBJ   := $(CUDA_SRC:%.cu=$(BUILD)/%.o)
LIBS_CUDA  := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart -lstdc++
endif

LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o) $(CUDA_OBJ)
APP_OBJ  := $(APP_SRC:%.c=$(BUILD)/%.o)

# tests/test_*.c need only the library; tests/oracle_*.c also link llama.cpp.
UNIT_SRC   := $(wildcard tests/test_*.c)
ORACLE_SRC := $(wildcard tests/oracle_*.c)
UNIT_BIN   := $(UNIT_SRC:tests/%.c=$(BUILD)/tests/%)
ORACLE_BIN := $(ORACLE_SRC:tests/%.c=$(BUILD)/tests/%)

ORACLE_LIB   := $(ORACLE)/lib
ORACLE_SRCDIR := $(ORACLE)/llama.cpp
ORACLE_CFLAGS := -I$(ORACLE_SRCDIR)/include -I$(ORACLE_SRCDIR)/ggml/include
ORACLE_LIBS   := $(ORACLE_LIB)/libllama.v0.5.0.so $(ORACLE_LIB)/libggml.v0.5.0.so \
                 $(ORACLE_LIB)/libggml-base.so -Wl,-rpath,$(abspath $(ORACLE_LIB))

.PHONY: all test fuzz clean oracle
all: $(BUILD)/brigade $(BUILD)/libbrigade.a

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/src/cuda/%.o: src/cuda/%.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) -MMD -MP -c $< -o $@

# The library is rebuilt when CUDA= changes in the same build directory.
CUDA_STAMP := $(BUILD)/.cuda$(CUDA)
$(CUDA_STAMP):
	@mkdir -p $(BUILD)
	@rm -f $(BUILD)/.cuda*
	@touch $@

$(BUILD)/libbrigade.a: $(LIB_OBJ) $(CUDA_STAMP)
	@rm -f $@
	ar rcs $@ $(filter %.o,$^)

$(BUILD)/brigade: $(APP_OBJ) $(BUILD)/libbrigade.a
	$(CC) $(ALL_CFLAGS) $(APP_OBJ) $(BUILD)/libbrigade.a $(LIBS) -o $@

$(BUILD)/tests/test_%: tests/test_%.c tests/check.h $(BUILD)/libbrigade.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $< $(BUILD)/libbrigade.a $(LIBS) -o $@

$(BUILD)/tests/oracle_%: tests/oracle_%.c tests/check.h tests/oracle.h $(BUILD)/libbrigade.a $(ORACLE)/stamp
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(ORACLE_CFLAGS) -DORACLE_LIB_DIR='"$(abspath $(ORACLE_LIB))"' \
	    -DORACLE_SRC_DIR='"$(abspath $(ORACLE_SRCDIR))"' \
	    $< $(BUILD)/libbrigade.a $(ORACLE_LIBS) $(LIBS) -o $@

# The oracle (llama.cpp prebuilt from npm plus its source) is a test
# dependency only; a failed install fails the test run loudly.
oracle: $(ORACLE)/stamp
$(ORACLE)/stamp: scripts/setup-oracle.sh
	ORACLE_DIR=$(ORACLE) sh scripts/setup-oracle.sh

# The chat-template test renders the real Jinja templates with Python's jinja2.
PYTHON ?= $(shell for p in python3 /usr/bin/python3; do $$p -c 'import jinja2' 2>/dev/null && { echo $$p; break; }; done)

# The CUDA kernels run on the host in make test, without a GPU: src/cuda/*.cu
# compiled by the C++ compiler against tests/cuda_emu (an emulation of the
# CUDA runtime, each CUDA thread a fiber). emu_cuda_ops checks every kernel
# against the host reference; emu_gpu_session runs sessions on them and
# compares logits with the CPU's. Not in a CUDA=1 build (its library holds
# the real kernels). Compiled by clang: its sections take the shared
# variables of inline and plain functions alike (g++ refuses to mix them),
# which the emulation fills with NaN bytes for each block.
EMU_CXX ?= clang++
EMU_CXXFLAGS := -std=c++17 -O2 -g -ffp-contract=off -Wall -Wextra -Werror -Wno-unknown-pragmas \
                -Wno-pass-failed -Itests/cuda_emu -Isrc -Iinclude
EMU_OBJ := $(patsubst src/cuda/%.cu,$(BUILD)/emu/%.o,$(wildcard src/cuda/*.cu)) $(BUILD)/emu/emu.o
ifneq ($(CUDA),1)
EMU_BIN := $(BUILD)/tests/emu_cuda_ops $(BUILD)/tests/emu_gpu_session
endif

$(BUILD)/emu/%.o: src/cuda/%.cu
	@mkdir -p $(dir $@)
	$(EMU_CXX) $(EMU_CXXFLAGS) -MMD -MP -x c++ -c $< -o $@
$(BUILD)/emu/emu.o: tests/cuda_emu/emu.cpp
	@mkdir -p $(dir $@)
	$(EMU_CXX) $(EMU_CXXFLAGS) -MMD -MP -c $< -o $@
$(BUILD)/tests/emu_cuda_ops: tests/test_cuda_ops.c tests/gpu_reference.h tests/check.h $(EMU_OBJ) \
                             $(BUILD)/libbrigade.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -DBG_TEST_EMULATION $< $(EMU_OBJ) $(BUILD)/libbrigade.a $(LIBS) -lstdc++ -o $@
$(BUILD)/tests/emu_gpu_session: tests/test_gpu_mock.c tests/gpu_reference.h tests/check.h \
                                $(EMU_OBJ) $(BUILD)/libbrigade.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -DBG_TEST_DEVICE -DBG_TEST_EMU_DEVICE $< $(EMU_OBJ) $(BUILD)/libbrigade.a \
	    $(LIBS) -lstdc++ -o $@
-include $(EMU_OBJ:.o=.d)
# The same kernel checks under ThreadSanitizer (tests/cuda_emu/cuda_runtime.h):
# the kernels instrumented, the emulation itself not; a data race between
# threads (a barrier or fence missing) fails it wherever it hides. Built
# with clang too (the race check maps each block's shared variables
# afresh).
TSAN_CXX ?= clang++
TSAN_CC ?= clang
TSAN_CXXFLAGS := $(EMU_CXXFLAGS) -DBG_EMU_TSAN
TSAN_OBJ := $(patsubst src/cuda/%.cu,$(BUILD)/tsan/%.o,$(wildcard src/cuda/*.cu)) $(BUILD)/tsan/emu.o
ifneq ($(CUDA),1)
EMU_BIN := $(BUILD)/tests/race_cuda_ops $(EMU_BIN)
endif
$(BUILD)/tsan/%.o: src/cuda/%.cu
	@mkdir -p $(dir $@)
	$(TSAN_CXX) $(TSAN_CXXFLAGS) -fsanitize=thread -MMD -MP -x c++ -c $< -o $@
$(BUILD)/tsan/emu.o: tests/cuda_emu/emu.cpp
	@mkdir -p $(dir $@)
	$(TSAN_CXX) $(TSAN_CXXFLAGS) -MMD -MP -c $< -o $@
# emu.o last: its pad ends the section of shared variables on a page
$(BUILD)/tests/race_cuda_ops: tests/test_cuda_ops.c tests/gpu_reference.h tests/check.h \
                              $(TSAN_OBJ) $(BUILD)/libbrigade.a
	@mkdir -p $(dir $@)
	$(TSAN_CC) $(ALL_CFLAGS) -fsanitize=thread -DBG_TEST_EMULATION $< $(TSAN_OBJ) \
	    $(BUILD)/libbrigade.a $(LIBS) -lstdc++ -o $@
-include $(TSAN_OBJ:.o=.d)
# make racecheck: the kernel checks, then whole GPU sessions on the emulated
# kernels (tests/test_gpu_mock.c), with the library instrumented too (its
# thread pool's atomics visible to the check): about 4 minutes more than
# make test's share, so kept out of it.
TSAN_LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/tsan/%.o)
$(BUILD)/tsan/src/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(TSAN_CC) $(ALL_CFLAGS) -fsanitize=thread -MMD -MP -c $< -o $@
$(BUILD)/tsan/libbrigade.a: $(TSAN_LIB_OBJ)
	ar rcs $@ $^
$(BUILD)/tests/race_gpu_session: tests/test_gpu_mock.c tests/gpu_reference.h tests/check.h \
                                 $(TSAN_OBJ) $(BUILD)/tsan/libbrigade.a
	@mkdir -p $(dir $@)
	$(TSAN_CC) $(ALL_CFLAGS) -fsanitize=thread -DBG_TEST_DEVICE -DBG_TEST_EMU_DEVICE $< $(TSAN_OBJ) \
	    $(BUILD)/tsan/libbrigade.a $(LIBS) -lstdc++ -o $@
-include $(TSAN_LIB_OBJ:.o=.d)
.PHONY: racecheck
racecheck: $(BUILD)/tests/race_cuda_ops $(BUILD)/tests/race_gpu_session
	TSAN_OPTIONS=halt_on_error=1 bash tests/run.sh $^
# The brigade program on the emulated kernels (slow; for checking a real
# geometry's GPU path by hand, e.g. eval -ngl 99 against the CPU's logits).
$(BUILD)/brigade-emu: $(APP_OBJ) $(EMU_OBJ) $(BUILD)/libbrigade.a
	$(CC) $(ALL_CFLAGS) $(APP_OBJ) $(EMU_OBJ) $(BUILD)/libbrigade.a $(LIBS) -lstdc++ -o $@

# make test builds its programs TEST_JOBS at a time (default: the CPU
# count), then runs them, the longest first (the race check, then the
# emulated kernels and sessions), side by side (tests/run.sh).
TEST_JOBS ?= $(shell nproc 2>/dev/null || echo 1)
.PHONY: test test-programs
test-programs: all asan $(UNIT_BIN) $(EMU_BIN) $(ORACLE_BIN)
test:
	$(MAKE) -j$(TEST_JOBS) test-programs
	TEST_JOBS=$(TEST_JOBS) BRIGADE=$(BUILD)/brigade ORACLE_SRC_DIR=$(abspath $(ORACLE_SRCDIR)) PYTHON="$(PYTHON)" \
	    BRIGADE_ASAN=$(BUILD)-asan/brigade TSAN_OPTIONS=halt_on_error=1 \
	    bash tests/run.sh $(EMU_BIN) $(UNIT_BIN) $(ORACLE_BIN) tests/cli_*.sh

# The GPU tests share the host reference of the device table.
$(BUILD)/tests/test_gpu_mock $(BUILD)/tests/test_cuda_ops: tests/gpu_reference.h

# In a CUDA=1 build: test_gpu_mock's device sessions on the real GPU
# (scripts/gpu-check.sh runs it; it needs a card, so not in make test).
$(BUILD)/tests/gpu_session: tests/test_gpu_mock.c tests/gpu_reference.h tests/check.h \
                            $(BUILD)/libbrigade.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -DBG_TEST_DEVICE $< $(BUILD)/libbrigade.a $(LIBS) -o $@

# tests/test_serve_api.c compiles the server's API sources into itself.
$(BUILD)/tests/test_serve_api: app/serve_api.c app/serve_sched.c app/serve_json.c app/serve.h

# The server soak (tests/cli_serve_soak.sh) runs brigade built with
# AddressSanitizer, in $(BUILD)-asan.
.PHONY: asan
asan:
	$(MAKE) BUILD=$(BUILD)-asan OPT=-O1 CFLAGS="-fsanitize=address -fno-omit-frame-pointer" \
	    $(BUILD)-asan/brigade

FUZZ_CFLAGS := -std=c11 -g -O1 -fsanitize=fuzzer,address,undefined \
               -fno-sanitize-recover=undefined -D_DEFAULT_SOURCE -D_FILE_OFFSET_BITS=64 \
               -Iinclude -Isrc $(PKG_CFLAGS)
fuzz: $(BUILD)/fuzz_gguf
$(BUILD)/fuzz_gguf: fuzz/fuzz_gguf.c $(LIB_SRC)
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) fuzz/fuzz_gguf.c $(LIB_SRC) $(LIBS) -o $@

# Benchmarks against the oracle (not part of make test): bench/*.c, and
# the brigade program that bench/compare runs beside them.
BENCH_BIN := $(patsubst bench/%.c,$(BUILD)/bench/%,$(wildcard bench/*.c))
.PHONY: bench
bench: $(BENCH_BIN) $(BUILD)/brigade
$(BUILD)/bench/%: bench/%.c tests/oracle.h $(BUILD)/libbrigade.a $(ORACLE)/stamp
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(ORACLE_CFLAGS) -Itests -DORACLE_LIB_DIR='"$(abspath $(ORACLE_LIB))"' \
	    -DORACLE_SRC_DIR='"$(abspath $(ORACLE_SRCDIR))"' \
	    $< $(BUILD)/libbrigade.a $(ORACLE_LIBS) $(LIBS) -o $@

clean:
	rm -rf $(BUILD)

-include $(LIB_OBJ:.o=.d) $(APP_OBJ:.o=.d)
