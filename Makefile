# The two commands of the README, and a few conveniences. CMake does the real build.
MAKEFLAGS += --no-print-directory
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release

.PHONY: run test build deps test-deps sanitize bench clean

run: deps build
	@mkdir -p data
	@test -f data/diffusion.npz || $(BUILD)/brisk synth diffusion data/diffusion.npz
	$(BUILD)/brisk train examples/diffusion.json

test: test-deps build
	cd $(BUILD) && ctest --output-on-failure -j2

build:
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD) -j$(JOBS)

deps:
	@tools/install-deps.sh

test-deps:
	@BUILD=$(BUILD) tools/install-deps.sh --test

# ASan + UBSan over the whole CPU suite (CI runs this too). CPU-only: ASan and the CUDA
# driver do not mix (its shadow memory collides with the driver's mappings), and the CUDA
# build is tested by `make test`.
sanitize: test-deps
	$(MAKE) test BUILD=build-asan CMAKE_FLAGS="-DCMAKE_BUILD_TYPE=RelWithDebInfo -DBRISK_SANITIZE=ON -DBRISK_CUDA=OFF"

bench: build
	bench/run.sh

clean:
	rm -rf $(BUILD) build-asan
