# The two commands of the README:
#   make demo   install what is missing, export the games, train ball_chase
#   make test   install what is missing, export the games, run every test (pytest + GDScript)

VENV := .venv
PY := $(VENV)/bin/python
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_PACKAGES := godot3-server godot3-runner xvfb xauth imagemagick xdotool

.PHONY: demo test play play-jumper export deps system-deps clean

demo: deps export
	$(PY) -m python_trainer train --env-id ball_chase --num-instances 2 --agents-per-instance 16 \
		--total-timesteps 1000000 --async --exp-name demo

# Watch the pretrained ball_chase agent in the game window (Xvfb is started when there is no $DISPLAY).
play: deps export
	$(PY) -m python_trainer play exports/policies/ball_chase.json

# The pretrained jumper agent (3D, hybrid actions), one arena with the camera following it.
play-jumper: deps export
	$(PY) -m python_trainer play exports/policies/jumper.json --agents 1

# Two pytest workers, each taking whole test files (a file's tests share its fixtures and never run beside each other):
# most tests wait on Godot processes, so two at once fill the 2 cores (888 tests: 9:07 against 15:53 one at a time).
test: deps export
	$(PY) -m pytest -q -n 2 --dist loadfile

export: deps
	$(PY) -m python_trainer export

deps: system-deps $(VENV)/.installed

system-deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	python3 -c "import ensurepip" 2>/dev/null || missing="$$missing python3-venv"; \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:$$missing"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

# torch first and pinned: 2.13.0 is a CPU build; anything that pulls an unpinned torch gets a multi-GB CUDA one.
$(VENV)/.installed: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[test]'
	touch $@

clean:
	rm -rf exports/headless exports/windowed .pytest_cache
