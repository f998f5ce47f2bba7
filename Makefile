# minimax.cpp — the two commands:
#   make run    set up, build the mmx binary only, generate from the embedded trained model
#   make test   set up, build everything, run every test (unit, ops, model, server, fuzz)
BUILD ?= build
JOBS  ?= $(shell nproc)
MMX   := $(BUILD)/tools/mmx
# The embedded default: a 4.4M-parameter MiniMax-M2 trained on Python's standard library
# (docs/models.md says how; committed in git as BF16).
TINY  := models/m2-tiny

.PHONY: all setup setup-test configure configure-test build build-mmx run test bench clean

all: build

# Two package sets (scripts/setup.sh): `run` is what the mmx binary needs to build and run;
# `test` adds GoogleTest, numpy, torch, clang, Chromium, node, ... which only the tests use.
setup:
	@bash scripts/setup.sh run

setup-test:
	@bash scripts/setup.sh test

# MMX_TESTS (CMakeLists.txt): AUTO builds the tests when GoogleTest is installed; configure-test
# re-runs CMake with ON, so a build folder first made by `make run` gains its tests.
$(BUILD)/CMakeCache.txt: | setup
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release

configure: $(BUILD)/CMakeCache.txt

configure-test: setup-test
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DMMX_TESTS=ON

build: configure-test
	cmake --build $(BUILD) -j $(JOBS)

build-mmx: setup configure
	cmake --build $(BUILD) --target mmx -j $(JOBS)

run: build-mmx
	@echo "== the embedded MiniMax-M2 ($(TINY), trained on Python's standard library) continues a function =="
	$(MMX) generate -m $(TINY) -p "def read_config(path):" -n 96 --temp 0.7 --top-p 0.95 --seed 7 --stats

test: build
	@bash scripts/npm_setup.sh $(BUILD)
	cd $(BUILD) && ctest -L "unit|ops|model|server|fuzz" --output-on-failure -j 2

bench: build
	bash bench/run.sh

clean:
	rm -rf $(BUILD)
