#!/bin/sh
echo solved sum
