#!/bin/bash
# Sequential benchmark runs against the server started beside this script.
set -u
B=target/release/iggy
A="--address 127.0.0.1:18090"
O=bench
run() { echo "=== $*"; $B bench "$@" $A 2>&1 | grep -v '^\s*[0-9.]* s ' | tr '\r' '\n' | grep -v "^ *[0-9.]* s  " ; }
for s in pinned-producer pinned-consumer pinned-producer-and-consumer balanced-producer balanced-consumer-group end-to-end-producing-consumer; do
  run $s --total-bytes 1GiB --calibrate --output $O/results/replicated
done
for s in pinned-producer balanced-producer end-to-end-producing-consumer; do
  run $s --total-bytes 1GiB --calibrate --durability persisted --output $O/results/persisted
done
run pinned-producer --producers 8 --total-bytes 1GiB --output $O/results/scaling/8-producers
run balanced-producer --partitions 8 --total-bytes 1GiB --output $O/results/scaling/8-partitions
run balanced-producer --producers 8 --partitions 8 --total-bytes 1GiB --output $O/results/scaling/8-producers-8-partitions
run pinned-producer --message-size 100 --total-bytes 256MiB --output $O/results/scaling/100-byte-messages
run pinned-consumer --message-size 100 --total-bytes 256MiB --output $O/results/scaling/100-byte-messages
echo DONE
