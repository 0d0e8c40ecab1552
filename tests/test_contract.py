"""The contract between the game and the trainer (python_trainer/base/contract.py): the addon's generated copy is
current, the binary's flags the trainer passes are all declared in it, and a game started with a misspelt flag of ours
says so in one line and runs on."""

import re
import subprocess
import sys

from python_trainer.base import contract
from python_trainer.base.processes import run_to_end
from python_trainer.envs.game import game_environ


def test_the_addons_contract_gd_is_the_one_generated_from_contract_py():
    assert contract.CONTRACT_GD.read_text() == contract.gdscript(), (
        "addons/rl_sync/contract.gd is stale: run python -m python_trainer.base.contract --write")
    assert contract.main(["--check"]) == 0


def test_a_flag_is_asked_for_by_name_and_an_undeclared_one_is_a_key_error():
    assert contract.flag("agents") == "--agents"
    try:
        contract.flag("agnets")
    except KeyError:
        return
    raise AssertionError("contract.flag accepted a flag the contract does not declare")


def test_every_flag_the_addon_reads_by_name_is_in_the_contract():
    """The addon's RlArgs reads (get_int(tree, "agents", ...), has("port"), get_string("policy")...) name only
    declared flags: a flag read but not declared would be warned about as unknown when a user gives it."""
    addon = contract.CONTRACT_GD.parent
    read = set()
    for path in list(addon.glob("*.gd")) + list((addon.parent.parent / "games").rglob("*.gd")):
        text = path.read_text()
        read |= set(re.findall(r'RlArgs\.(?:get_int|get_string|get_positive_float|has)\((?:[\w().]+, )?"([a-z]\w*)"',
                               text))
        read |= set(re.findall(r'^const (?:\w+_)?FLAG := "([a-z]\w*)"', text, re.M))  # a flag's name kept in a constant
    assert read and read <= set(contract.FLAGS), sorted(read - set(contract.FLAGS))


def test_docs_binary_md_lists_exactly_the_contracts_flags_but_the_tests_own():
    rows = [line for line in (contract.CONTRACT_GD.parents[3] / "docs" / "binary.md").read_text().splitlines()
            if line.startswith("| `--")]
    documented = {name for row in rows for name in re.findall(r"`--([a-z_]+)", row.split("|")[1])}
    assert documented == {name for name, reader in contract.FLAGS.items() if reader != contract.TESTS}


def test_a_game_started_with_a_misspelt_flag_says_it_in_one_line_and_runs_on(headless_export):
    out = run_to_end([str(headless_export), "--env=ball_chase", "--agents=2", "--agnets=4", "--benchmark_steps=20",
                      "--fixed-fps", "60"], timeout=60, env=game_environ())
    said = [line for line in out.stderr.splitlines() if "unknown flag" in line]
    assert said == ["rl_sync: warning: unknown flag --agnets=4; did you mean --agents?"], out.stderr[-2000:]
    assert out.returncode == 0 and '"benchmark"' in out.stdout


def test_a_game_started_with_our_flags_and_godot_rls_says_nothing_of_them(headless_export):
    out = run_to_end([str(headless_export), "--env=ball_chase", "--env_seed=3", "--speedup=2", "--action_repeat=1",
                      "--headless", "--benchmark_steps=20", "--fixed-fps", "60"], timeout=60, env=game_environ())
    assert out.returncode == 0 and "unknown flag" not in out.stderr, out.stderr[-2000:]


def test_the_trainer_writes_the_binarys_flags_through_the_contract_never_as_literals():
    """No module but contract.py spells a game flag as a string: `"--name=..."` (the binary's form; the trainer's
    own flags take a space) or a bare `"--name"` of an underscored flag; they go through contract.arg and flag."""
    root = contract.CONTRACT_GD.parents[3] / "python_trainer"
    names = "|".join(sorted(contract.FLAGS, key=len, reverse=True))
    underscored = "|".join(n for n in contract.FLAGS if "_" in n)
    spelt = re.compile(r'(?<![\w-])f?["\']--(?:(?:%s)=|(?:%s)["\'])' % (names, underscored))
    found = [f"{path.relative_to(root.parent)}:{i}" for path in root.rglob("*.py") if path.name != "contract.py"
             for i, line in enumerate(path.read_text().splitlines(), 1) if spelt.search(line)]
    assert found == [], found


def test_the_contract_module_runs_as_a_command():
    result = subprocess.run([sys.executable, "-m", "python_trainer.base.contract", "--check"], capture_output=True,
                            text=True, cwd=contract.CONTRACT_GD.parents[3], timeout=60)
    assert result.returncode == 0, result.stderr
