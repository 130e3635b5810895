import json, sys
print(json.dumps({"type": "hello"}))
