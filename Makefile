# The two commands of the README, and a few conveniences. CMake does the real build.
MAKEFLAGS += --no-print-directory
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release

.PHONY: run test build brisk configure deps test-deps sanitize tsan fuzz bench clean install

# The brisk command alone (and the library it links): what `make run` runs. The test programs,
# their CUDA kernels and the Fortran examples are `make build`'s and `make test`'s.
run: deps brisk
	@mkdir -p data
	@test -f data/diffusion.npz || $(BUILD)/brisk synth diffusion data/diffusion.npz
	$(BUILD)/brisk train examples/diffusion.json --overwrite

test: test-deps build
	cd $(BUILD) && ctest --output-on-failure --no-tests=error -j2

configure:
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null

build: configure
	cmake --build $(BUILD) -j$(JOBS)

brisk: configure
	cmake --build $(BUILD) -j$(JOBS) --target brisk_cli

deps:
	@tools/install-deps.sh

test-deps:
	@BUILD=$(BUILD) tools/install-deps.sh --test

# ASan + UBSan over the whole CPU suite (CI runs this too). CPU-only: ASan and the CUDA
# driver do not mix (its shadow memory collides with the driver's mappings), and the CUDA
# build is tested by `make test`.
sanitize: test-deps
	$(MAKE) test BUILD=build-asan CMAKE_FLAGS="-DCMAKE_BUILD_TYPE=RelWithDebInfo -DBRISK_SANITIZE=ON -DBRISK_CUDA=OFF"

# ThreadSanitizer over the tests of threads (labelled "threads": sessions from several threads,
# a C++ host with an OpenMP solver and a training thread, a Python thread pool); CI runs it.
tsan: test-deps
	cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBRISK_TSAN=ON -DBRISK_CUDA=OFF >/dev/null
	cmake --build build-tsan -j$(JOBS) --target brisk_cli brisk_shared api_test_threads api_test_session_edges api_test_stop_clear api_cxx_host
	cd build-tsan && ctest --output-on-failure --no-tests=error -L threads

# Every libFuzzer target (clang, ASan + UBSan) for FUZZ_SECONDS each, from its seed corpus;
# fails on any finding (CI runs this too). tools/fuzz.sh says where findings are kept.
FUZZ_SECONDS ?= 60
fuzz: test-deps
	FUZZ_SECONDS=$(FUZZ_SECONDS) JOBS=$(JOBS) tools/fuzz.sh build-fuzz

# The brisk command, libbrisk.a, its headers, brisk.pc (pkg-config) and the CMake package
# (find_package(brisk)) under PREFIX, with the link line of the build that was made.
PREFIX ?= /usr/local
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

bench: build
	bench/run.sh

clean:
	rm -rf $(BUILD) build-asan build-tsan build-fuzz
