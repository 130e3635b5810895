#!/bin/sh
mkdir -p /app/repo
