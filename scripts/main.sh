#!/usr/bin/env bash
# The main job: set-up and build, then train the Fashion-MNIST MLP on the real
# data of the Debian package dataset-fashion-mnist and print its test accuracy.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export LUA_PATH="./lua/?.lua;./lua/?/init.lua;;"
exec luajit examples/fashion_mnist_mlp.lua "$@"
