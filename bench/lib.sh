# Shared by the bench comparison scripts (transports.sh, backends.sh): the figures of one
# run's report and the median of a column.
figures() {
  python3 -c 'import json,sys; a=next(iter(json.load(open(sys.argv[1]))["aggregate"].values())); l=a["latency_us"]; print(a["megabytes_per_second"], l["p50"], l["p99"])' "$1"
}
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
