#!/bin/sh
# The fetch program of TestFetchConcurrency: /slow records its pid in the file named by $1
# and sleeps in a child process (its time limit ends both); anything else answers at once.
case "$PATH_INFO" in
/slow) echo "slow $$" >> "$1"; sleep 60 ;;
esac
printf 'Content-Type: text/plain\r\n\r\n%s\n' "$PATH_INFO"
