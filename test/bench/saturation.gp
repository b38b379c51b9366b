# Saturation plot: TPS (top) and p99 latency (bottom) against max_active /
# pool size, for dbgate fair, non-fair and 'lifo' and PgBouncer, with the ungated
# server as a reference line; one column per statement size.  Called by
# run.sh as  gnuplot -e "dir='RESULTS'; loads='S 1ms'" saturation.gp
# (reads dir/saturation_S.dat and dir/saturation_1ms.dat, or those of loads).
if (!exists("dir")) dir = "."
if (!exists("clients")) clients = 64
if (!exists("loads")) loads = "S 1ms"
nl = words(loads)
name(w) = (w eq "S") ? "pgbench -S" : "~1 ms range query"
set terminal pngcairo size 1200,900 font ",11" noenhanced
set output dir."/saturation.png"
set multiplot layout 2,nl title sprintf("Saturation: %d clients, TPS and p99 against max_active / pool size", clients)
set logscale x 2
set xtics (1, 2, 4, 8, 16, 32, 64, 128)
stats dir."/saturation_".word(loads, 1).".dat" using 1 nooutput
set xrange [STATS_min / 1.3 : STATS_max * 1.3]
set grid
set key bottom right opaque
set xlabel "max_active (dbgate) / default_pool_size (PgBouncer)"
do for [i=1:nl] {
    f = dir."/saturation_".word(loads, i).".dat"
    set title name(word(loads, i))." — throughput"
    set ylabel "TPS"
    set yrange [0:*]
    set offsets 0, 0, graph 0.1, 0
    unset logscale y
    plot f using 1:2 with linespoints pt 7 lw 2 lc rgb "#4e79a7" title "dbgate fair", \
         f using 1:3 with linespoints pt 5 lw 2 lc rgb "#59a14f" title "dbgate non-fair", \
         f using 1:10 with linespoints pt 13 lw 2 lc rgb "#b07aa1" title "dbgate lifo", \
         f using 1:4 with linespoints pt 9 lw 2 lc rgb "#f28e2b" title "PgBouncer", \
         f using 1:5 with lines dt 2 lw 2 lc rgb "#000000" title "ungated"
}
do for [i=1:nl] {
    f = dir."/saturation_".word(loads, i).".dat"
    set title name(word(loads, i))." — p99 latency"
    set ylabel "p99 (ms, log scale)"
    set logscale y
    set yrange [*:*]
    set offsets 0, 0, 0, 0
    plot f using 1:6 with linespoints pt 7 lw 2 lc rgb "#4e79a7" title "dbgate fair", \
         f using 1:7 with linespoints pt 5 lw 2 lc rgb "#59a14f" title "dbgate non-fair", \
         f using 1:11 with linespoints pt 13 lw 2 lc rgb "#b07aa1" title "dbgate lifo", \
         f using 1:8 with linespoints pt 9 lw 2 lc rgb "#f28e2b" title "PgBouncer", \
         f using 1:9 with lines dt 2 lw 2 lc rgb "#000000" title "ungated"
}
unset multiplot
