#!/bin/sh
echo driver
