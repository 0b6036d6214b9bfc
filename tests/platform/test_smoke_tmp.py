import json, time
import pytest
from yuxi_dash.cli import main

def test_smoke(db_url, platform_configured, attached, capsys):
    t=time.time()
    ran = attached.run([{"thread_id": "plat-hot", "user_id": "alice", "agent": "research", "turns": 3, "result_words": 250}])
    print("run", time.time()-t, ran)
    assert main(["attach", "scan"]) == 0
    capsys.readouterr()
    t=time.time()
    code = main(["compress", "plat-hot", "--actor", "ops", "--json"])
    out = capsys.readouterr().out
    print("compress", time.time()-t, code, out)
    print(platform_configured.record())
    assert code == 0
