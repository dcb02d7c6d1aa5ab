#!/bin/bash
# Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#
# Issue 3's comparison: np 2 allreduce, Hora (horarun, shm and tcp) against
# OpenMPI's MPI_Allreduce (vader; btl tcp,self), alternating, two rounds.
# Needs the build (build/bin). Prints one line per measurement.
#
#   bench/allreduce_vs_openmpi.sh
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for round in 1 2; do
  echo "== round $round"
  echo "-- shm 8B hora";  build/bin/horarun -np 2 --transport shm build/bin/hora-bench allreduce --inplace --sizes 8:8 --iters 20000 2>&1 | grep -E "^\[0\]: +[0-9]+ +[0-9]+ hora"
  echo "-- shm 8B ompi";  mpirun.openmpi -np 2 --mca btl self,vader build/bin/mpi-allreduce-bench-openmpi 8:8 20000 2>&1 | grep -E "^ +[0-9]"
  echo "-- shm 64M hora"; build/bin/horarun -np 2 --transport shm build/bin/hora-bench allreduce --inplace --sizes 64M:64M --iters 10 2>&1 | grep -E "^\[0\]: +[0-9]+ +[0-9]+ hora"
  echo "-- shm 64M ompi"; mpirun.openmpi -np 2 --mca btl self,vader build/bin/mpi-allreduce-bench-openmpi 64M:64M 10 2>&1 | grep -E "^ +[0-9]"
  echo "-- tcp 8B hora";  build/bin/horarun -np 2 --transport tcp build/bin/hora-bench allreduce --inplace --sizes 8:8 --iters 2000 2>&1 | grep -E "^\[0\]: +[0-9]+ +[0-9]+ hora"
  echo "-- tcp 8B ompi";  mpirun.openmpi -np 2 --mca btl tcp,self build/bin/mpi-allreduce-bench-openmpi 8:8 2000 2>&1 | grep -E "^ +[0-9]"
  echo "-- tcp 1M hora";  build/bin/horarun -np 2 --transport tcp build/bin/hora-bench allreduce --inplace --sizes 1M:1M --iters 100 2>&1 | grep -E "^\[0\]: +[0-9]+ +[0-9]+ hora"
  echo "-- tcp 1M ompi";  mpirun.openmpi -np 2 --mca btl tcp,self build/bin/mpi-allreduce-bench-openmpi 1M:1M 100 2>&1 | grep -E "^ +[0-9]"
  echo "-- tcp 64M hora"; build/bin/horarun -np 2 --transport tcp build/bin/hora-bench allreduce --inplace --sizes 64M:64M --iters 10 2>&1 | grep -E "^\[0\]: +[0-9]+ +[0-9]+ hora"
  echo "-- tcp 64M ompi"; mpirun.openmpi -np 2 --mca btl tcp,self build/bin/mpi-allreduce-bench-openmpi 64M:64M 10 2>&1 | grep -E "^ +[0-9]"
done
