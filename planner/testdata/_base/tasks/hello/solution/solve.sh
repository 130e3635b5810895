#!/bin/sh
echo solved hello
