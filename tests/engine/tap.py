"""TAP lines for the Python test scripts (tools/test counts them): numbered
ok / not ok lines, a failure's detail as comment lines. The scripts import
it from their own directory, as they do telemetry_client."""

import sys

count = 0
failed = False


def check(name, condition, detail=""):
    global count, failed
    count += 1
    if condition:
        print(f"ok {count} - {name}")
    else:
        failed = True
        print(f"not ok {count} - {name}")
        for line in str(detail).splitlines()[:20]:
            print(f"# {line[:400]}")
    sys.stdout.flush()
