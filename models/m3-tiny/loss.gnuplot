set terminal png size 900,540
set output 'models/m3-tiny/loss.png'
set datafile separator ','
set xlabel 'step'
set ylabel 'loss (nats/token)'
set grid
plot 'models/m3-tiny/train_log.csv' every ::1 using 1:3 with lines lw 2 title 'train', \
     '' every ::1 using 1:($5 > 0 ? $5 : 1/0) with linespoints pt 7 title 'held-out'
