# Hora: the README's two commands are `make demo` and `make test`.
# Both install missing Debian packages first (scripts/setup-deps) and build.

BUILD      ?= build
BUILD_ASAN ?= build-asan
JOBS       ?= $(shell nproc)
CMAKE_GEN  := -G Ninja

.PHONY: all deps build demo test test-unit test-asan build-asan format format-check bench clean

all: build

deps:
	@./scripts/setup-deps

build: deps
	@cmake -S . -B $(BUILD) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null
	@cmake --build $(BUILD) -j $(JOBS)

# The main job. Until the launcher and Python API exist: a 4-rank allreduce
# with ranks as threads, through every algorithm.
demo: build
	@$(BUILD)/bin/hora-demo

# Everything CI runs: formatting, the tests, and the tests again under
# AddressSanitizer + UndefinedBehaviorSanitizer (whose allreduce matrix stops
# at 1 MiB messages instead of 4 MiB, for time).
test: format-check test-unit test-asan

test-unit: build
	@cd $(BUILD) && ctest -j $(JOBS) --output-on-failure --timeout 600

build-asan: deps
	@cmake -S . -B $(BUILD_ASAN) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DHORA_SANITIZE="address;undefined" -DHORA_BUILD_BENCH=OFF > /dev/null
	@cmake --build $(BUILD_ASAN) -j $(JOBS)

test-asan: build-asan
	@cd $(BUILD_ASAN) && HORATEST_LARGE_BYTES=1M ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest -j $(JOBS) --output-on-failure --timeout 900

FORMAT_FILES = $(shell git ls-files '*.cc' '*.h')

format: deps
	@clang-format -i $(FORMAT_FILES)

format-check: deps
	@clang-format --dry-run --Werror $(FORMAT_FILES)

bench: build
	@$(BUILD)/bin/hora-kernel-bench --benchmark_filter='Memcpy|SumF32' \
	  --benchmark_repetitions=5 --benchmark_report_aggregates_only=true

clean:
	rm -rf $(BUILD) $(BUILD_ASAN)
