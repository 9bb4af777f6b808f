"""scripts/check-readme-commands: the README's install and test commands are the ones CI runs."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "check-readme-commands"


def check(readme: Path | None = None, ci: Path | None = None) -> subprocess.CompletedProcess:
    args = [str(p) for p in (readme or ROOT / "README.md", ci or ROOT / ".ci" / "run")]
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True)


def test_the_readme_and_ci_agree():
    r = check()
    assert r.returncode == 0, r.stderr
    assert 'python3 -m pip install ".[test]"' in r.stdout and "python3 -m pytest" in r.stdout


def test_ci_calls_the_check():
    assert "scripts/check-readme-commands" in [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines()]


def test_a_readme_command_ci_does_not_run_fails(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text((ROOT / "README.md").read_text().replace('python3 -m pip install ".[test]"',
                                                              'python3 -m pip install -e ".[test]"', 1))
    r = check(readme)
    assert r.returncode == 1
    assert 'the README says `python3 -m pip install -e ".[test]"`, which' in r.stderr


def test_a_ci_command_the_readme_does_not_say_fails(tmp_path):
    ci = tmp_path / "run"
    ci.write_text((ROOT / ".ci" / "run").read_text().replace("python3 -m pytest", "python3 -m pytest -x"))
    r = check(ci=ci)
    assert r.returncode == 1 and "runs `python3 -m pytest -x` as a README command" in r.stderr


def test_a_readme_without_a_test_section_fails(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# x\n\n## Install\n\n```bash\npip install .\n```\n")
    r = check(readme)
    assert r.returncode == 1 and "no '## Test' section" in r.stderr
