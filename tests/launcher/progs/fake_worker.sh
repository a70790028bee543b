#!/bin/sh
# Stands in for lf-worker in launcher tests: shows what the agent gave it.
echo "WORKER_ARGS $*"
echo "WORKER_RANK $RANK/$WORLD_SIZE"
