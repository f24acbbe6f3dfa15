"""The kill trial's key policy (shared by the workers and the checks): the one
payload field is the intent's number."""

POLICY = {"version": 1, "bucketSeconds": 900, "actionTypes": ["ledger.write", "ledger.write.by-task-id"],
          "fields": {"n": {"class": "key", "normalizer": "integer"}}}
