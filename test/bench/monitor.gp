# Monitoring picture: a standing queue builds and drains.  Called by
# monitor.sh as
#   gnuplot -e "dir='RESULTS'; order='fifo'; bstart=3.0; bend=9.0; B=4; ms=20" monitor.gp
# (reads dir/queue-ORDER.dat and dir/hist-ORDER.dat, writes
# dir/monitor-ORDER.png).  Top: queued (area), active and oldest_wait over
# time; bottom: of the statements admitted in each ~100 ms, the share that
# waited up to 1, 10, 50, 100, 500, 1000 ms and longer (from the
# differences of consecutive dbgate.wait_histogram samples).
if (!exists("dir")) dir = "."
if (!exists("order")) order = "fifo"
if (!exists("bstart")) bstart = 0
if (!exists("bend")) bend = 0
if (!exists("B")) B = 0
if (!exists("ms")) ms = 0
q = dir."/queue-".order.".dat"
h = dir."/hist-".order.".dat"
set terminal pngcairo size 1100,900 font ",11" noenhanced
set output dir."/monitor-".order.".png"
set multiplot layout 2,1 title sprintf("dbgate.status and dbgate.wait_histogram every 100 ms: queue_order '%s', max_active %d, statements of %d ms", order, B, ms)
set grid
set xlabel "seconds"
stats q using 1 nooutput
set xrange [0:STATS_max]
set arrow 1 from bstart, graph 0 to bstart, graph 1 nohead dt 2 lc rgb "#555555"
set arrow 2 from bend, graph 0 to bend, graph 1 nohead dt 2 lc rgb "#555555"
set label 1 "burst starts" at bstart, graph 0.96 offset 0.5,0 left
set label 2 "burst stops" at bend, graph 0.96 offset 0.5,0 left

set title "queue length, active statements and the oldest waiter's wait"
set ylabel "statements"
set yrange [0:*]
set y2label "oldest_wait (ms)"
set y2range [0:*]
set y2tics
set ytics nomirror
set key top right opaque
plot q using 1:3 with filledcurves y1=0 fs solid 0.35 lc rgb "#4e79a7" title "queued", \
     q using 1:2 with steps lw 2 lc rgb "#59a14f" title "active", \
     q using 1:4 axes x1y2 with lines lw 2 lc rgb "#e15759" title "oldest_wait (right axis)"

set title "how long the statements admitted in each ~100 ms waited (share of them)"
unset y2label
unset y2tics
set ytics mirror
set ylabel "share of the admissions"
set yrange [0:1]
set key outside right top vertical
set style fill solid 0.9 noborder
plot h using 1:(0):3 with filledcurves lc rgb "#1a9850" title "<= 1 ms", \
     h using 1:3:4 with filledcurves lc rgb "#91cf60" title "1-10 ms", \
     h using 1:4:5 with filledcurves lc rgb "#d9ef8b" title "10-50 ms", \
     h using 1:5:6 with filledcurves lc rgb "#fee08b" title "50-100 ms", \
     h using 1:6:7 with filledcurves lc rgb "#fc8d59" title "100-500 ms", \
     h using 1:7:8 with filledcurves lc rgb "#d73027" title "500-1000 ms", \
     h using 1:8:9 with filledcurves lc rgb "#7f0000" title "> 1000 ms"
unset multiplot
