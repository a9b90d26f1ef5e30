#!/bin/sh
echo "nostart: refusing to run" >&2
exit 3
