# minimax.cpp — the two commands:
#   make run    set up, build, create the embedded tiny model if missing, generate from it
#   make test   set up, build, run every test (unit, ops, model)
BUILD ?= build
JOBS  ?= $(shell nproc)
MMX   := $(BUILD)/tools/mmx
TINY  := models/tiny-m2

.PHONY: all setup configure build run test bench clean

all: build

setup:
	@bash scripts/setup.sh

$(BUILD)/CMakeCache.txt: | setup
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release

configure: $(BUILD)/CMakeCache.txt

build: setup configure
	cmake --build $(BUILD) -j $(JOBS)

$(TINY)/model.safetensors: | build
	$(MMX) make-tiny --arch minimax_m2 -o $(TINY) --dtype bf16 --seed 1

run: build $(TINY)/model.safetensors
	@echo "== chat with the embedded tiny MiniMax-M2 ($(TINY): random weights, so the reply is noise) =="
	$(MMX) generate -m $(TINY) --chat -p "Hello! Who are you?" --show-prompt -n 32 --temp 0.8 --top-p 0.95 --seed 7 --stats

test: build
	@bash scripts/npm_setup.sh $(BUILD)
	cd $(BUILD) && ctest -L "unit|ops|model|server" --output-on-failure -j 2

bench: build
	bash bench/run.sh

clean:
	rm -rf $(BUILD)
