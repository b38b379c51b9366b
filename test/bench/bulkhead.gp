# Bulkhead plot: interactive statement latency p50 / p99 for
# (a) alone, (b) flood ungated, (c) flood gated.  Called by run.sh as
#   gnuplot -e "dir='RESULTS'" bulkhead.gp   (reads dir/bulkhead.dat)
if (!exists("dir")) dir = "."
set terminal pngcairo size 900,560 font ",11" noenhanced
set output dir."/bulkhead.png"
set title "Bulkhead: interactive pgbench -S (4 clients) vs reporting flood (32 clients)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set logscale y
set yrange [0.01:*]
set ylabel "interactive statement latency (ms, log scale)"
set grid ytics
set key top left
plot dir."/bulkhead.dat" using 2:xtic(1) title "p50" lc rgb "#4e79a7", \
     '' using 3 title "p99" lc rgb "#e15759", \
     '' using ($0-0.15):2:(sprintf("%.2f", $2)) with labels offset 0,0.7 notitle, \
     '' using ($0+0.15):3:(sprintf("%.2f", $3)) with labels offset 0,0.7 notitle
