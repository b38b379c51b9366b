# The adaptive limit over time in adapt.sh's shift case (sleep, cpu, sleep
# phases through one budget with adapt 'on').  Called by adapt.sh as
#   gnuplot -e "dir='RESULTS'; reps=3; phase=30; clients=64; maxa=64" adapt.gp
# (reads dir/shift-rN.dat for N = 1..reps: seconds since phase 1 began, L,
# active, queued, phase; and dir/shift-phases.dat: rep and the epochs of the
# phases' starts and of the end; writes dir/shift.png).  Top: L of every
# repetition; bottom: active and queued of repetition 1.  The dashed lines
# are where repetition 1's phases began.
if (!exists("dir")) dir = "."
if (!exists("reps")) reps = 1
if (!exists("phase")) phase = 30
if (!exists("clients")) clients = 64
if (!exists("maxa")) maxa = 64
f(r) = sprintf("%s/shift-r%d.dat", dir, r)
ph = dir."/shift-phases.dat"
stats ph every ::0::0 using ($3 - $2) nooutput
b1 = STATS_min
stats ph every ::0::0 using ($4 - $2) nooutput
b2 = STATS_min
set terminal pngcairo size 1100,800 font ",11" noenhanced
set output dir."/shift.png"
set multiplot layout 2,1 title sprintf("adaptive limit: %d clients, phases of %d s: sleep, cpu, sleep (max_active %d)", clients, phase, maxa)
set grid
set xlabel "seconds since phase 1 began"
set xrange [0:*]
set arrow 1 from b1, graph 0 to b1, graph 1 nohead dt 2 lc rgb "#555555"
set arrow 2 from b2, graph 0 to b2, graph 1 nohead dt 2 lc rgb "#555555"
set label 1 "cpu" at b1, graph 0.96 offset 0.5,0 left
set label 2 "sleep" at b2, graph 0.96 offset 0.5,0 left
set label 3 "sleep" at 0, graph 0.96 offset 0.5,0 left

set title "adaptive_limit L (sampled every 250 ms)"
set ylabel "L"
set logscale y 2
set yrange [0.8:maxa * 1.3]
set key bottom left opaque
plot for [r=1:reps] f(r) using 1:2 with steps lw 2 title sprintf("L, repetition %d", r)

set title "active and queued statements of repetition 1"
unset logscale y
set ylabel "statements"
set yrange [0:*]
set key top right opaque
plot f(1) using 1:4 with filledcurves y1=0 fs solid 0.35 lc rgb "#4e79a7" title "queued", \
     f(1) using 1:3 with steps lw 2 lc rgb "#59a14f" title "active", \
     f(1) using 1:2 with steps lw 1 dt 3 lc rgb "#e15759" title "L"
unset multiplot
