extends Node
# Copies of a game's scene in one process, each in its own Viewport with its own World2D and World,
# so each copy's physics and 2D canvas are its own: ML-Agents' "training areas" for a scene that was
# not written for them (a screen-sized game of one agent). One process then steps many agents per
# round trip with the trainer instead of one.
#
# Asked for with --copies=N (the trainer's --copies: a run's choice, not the scene's). When RLSync
# starts (sync.gd's _start()), take_over() replaces the current scene by this host node:
#   - the RLSync node moves under the host and drives every copy's agents (its agent list is the tree's
#     "AGENT" group: copy 0's agents, then copy 1's, ...); each copy's own RLSync node is removed before
#     the copy enters the tree, so one connection talks to the trainer;
#   - copy k is an instance of the scene's file in Viewport "Copy<k>", the window's size, built while
#     rl_args.gd answers --env_seed with env_seed + k, so a game that seeds its generators from
#     --env_seed in its _ready plays copy k's episodes as a run of one with that seed would;
#   - headless, the copies' viewports never render; in a window they do, and a grid of TextureRects
#     shows them, each fit to its tile when it is drawn (no simulating node is moved or scaled).
# Before that, copies_check.gd reads the game's scripts for what the copies would share (tree-wide
# groups, the tree's pause, autoloads, the global random generator, the Input singleton); each finding
# is printed, and sent to the trainer in env_info ("copies", report()); an agent that acts through
# Input.action_press refuses copies with an error. While they run, input_watch.gd catches what the
# reading missed: an action pressed through Input ends the run with one line (problem()).

const RlArgs = preload("res://addons/rl_sync/rl_args.gd")
const CopiesCheck = preload("res://addons/rl_sync/copies_check.gd")
const InputWatch = preload("res://addons/rl_sync/input_watch.gd")
const AgentController = preload("res://addons/rl_sync/agent_controller.gd")
const ArenaGrid = preload("res://addons/rl_sync/arena_grid.gd")

# The meta of a copy's Viewport (its index) and of the host (the number of copies).
const COPY_META := "rl_sync_copy"
const HOST_META := "rl_sync_copies"
# A process past this many copies of a scene only runs slower than more processes would.
const MAX_COPIES := 256

# The copies' viewports, in order, and the lines of the script check's findings.
var copies := []
var findings := []
var _tiles := []


# The first step of RLSync._start(): with more than one copy asked for, builds them and starts the sync
# node again, deferred (so that the copies' own deferred set-up has run when it gathers their agents).
# True when it took the start over (or failed the run); false to start as usual.
static func take_over(sync_node: Node) -> bool:
	var tree := sync_node.get_tree()
	if sync_node.get_parent().has_meta(HOST_META):
		return false  # the copies are built: start
	var count = RlArgs.get_int(tree, "copies", 1, 1, MAX_COPIES)
	if count == null:
		return true
	if count == 1:
		return false
	var scene: Node = tree.current_scene
	if scene == null or scene == sync_node or not scene.is_a_parent_of(sync_node) or scene.filename == "":
		RlArgs.fail(tree, "--copies=%d: the RLSync node must be inside the running scene, saved as a file, and not its root" % count)
		return true
	var found: Array = CopiesCheck.new().findings(scene)
	for line in CopiesCheck.lines_of(found):
		print("rl_sync: copies: " + line)
	var refused := CopiesCheck.refusal(found)
	if refused != "":
		RlArgs.fail(tree, "--copies=%d cannot run this game: %s" % [count, refused])
		return true
	var host = load("res://addons/rl_sync/scene_copies.gd").new()
	host.findings = CopiesCheck.lines_of(found)
	if host.build(sync_node, scene, count):
		sync_node.call_deferred("_start")
	return true


# What env_info says of the copies (our extension): their number and the script check's findings.
static func report(sync_node: Node) -> Dictionary:
	var host := sync_node.get_parent()
	if host == null or not host.has_meta(HOST_META):
		return {"count": 1, "findings": []}
	return {"count": host.copies.size(), "findings": host.findings}


# "" or what a copy pressed through the Input singleton (input_watch.gd): the run ends with it.
static func problem() -> String:
	return InputWatch.problem()


# Replaces `scene` (the tree's current scene) by this host, holding `sync_node` and `count` copies of
# the scene's file. False (the run failed) once the copies hold more agents than one process can build:
# past ArenaGrid.MAX_AGENTS, Godot's message queue overflows while the scene is set up, and the game
# would never connect.
func build(sync_node: Node, scene: Node, count: int) -> bool:
	var tree := sync_node.get_tree()
	var packed: PackedScene = load(scene.filename)
	var seed_value = RlArgs.get_int(tree, "env_seed", 0, 0)
	name = "SceneCopies"
	set_meta(HOST_META, count)
	sync_node.get_parent().remove_child(sync_node)
	tree.root.remove_child(scene)
	scene.queue_free()
	tree.root.add_child(self)
	tree.current_scene = self
	add_child(sync_node)
	var headless := RlArgs.is_headless()
	var is_3d := false
	for k in range(count):
		var viewport := Viewport.new()
		viewport.name = "Copy%d" % k
		viewport.size = tree.root.size
		viewport.world_2d = World2D.new()
		viewport.set_meta(COPY_META, k)
		viewport.render_target_update_mode = Viewport.UPDATE_DISABLED if headless else Viewport.UPDATE_ALWAYS
		viewport.render_target_v_flip = true
		RlArgs.set_override({"env_seed": str(seed_value + k)})
		var copy := packed.instance()  # its nodes exist, and enter the tree (their _ready) with the viewport
		_remove_sync_nodes(copy, sync_node.get_script())
		is_3d = is_3d or _has_3d(copy)
		viewport.own_world = is_3d  # a World of its own (3D physics, scenario) only where there is 3D to hold
		viewport.add_child(copy)
		add_child(viewport)
		copies.append(viewport)
		var agents := tree.get_nodes_in_group(AgentController.AGENT_GROUP).size()
		if agents > ArenaGrid.MAX_AGENTS:
			RlArgs.fail(tree, ("--copies=%d: %d copies already hold %d agents, over the %d one instance can " +
					"build: fewer copies or agents per instance (--agents), more instances") %
					[count, k + 1, agents, ArenaGrid.MAX_AGENTS])
			return false
	RlArgs.set_override({})
	add_child(InputWatch.new(count))
	if not headless:
		_show_tiles()
	return true


static func _remove_sync_nodes(root: Node, sync_script: Script) -> void:
	var nodes := [root]
	while not nodes.empty():
		var node: Node = nodes.pop_back()
		if node.get_script() == sync_script:
			node.get_parent().remove_child(node)
			node.free()
		else:
			nodes += node.get_children()


static func _has_3d(root: Node) -> bool:
	var nodes := [root]
	while not nodes.empty():
		var node: Node = nodes.pop_back()
		if node is Spatial:
			return true
		nodes += node.get_children()
	return false


func _show_tiles() -> void:
	var layer := CanvasLayer.new()  # its own transform: a game's canvas transform of the root moves no tile
	add_child(layer)
	for viewport in copies:
		var tile := TextureRect.new()
		tile.texture = viewport.get_texture()
		tile.expand = true
		tile.stretch_mode = TextureRect.STRETCH_KEEP_ASPECT_CENTERED
		layer.add_child(tile)
		_tiles.append(tile)
	get_tree().root.connect("size_changed", self, "_fit_tiles")
	_fit_tiles()


# A grid of tiles over the window; each copy keeps the window's size, so its game lays itself out as
# in a run of one, and its tile shows it scaled down.
func _fit_tiles() -> void:
	var size := get_tree().root.size
	var columns := int(ceil(sqrt(copies.size())))
	var rows := int(ceil(copies.size() / float(columns)))
	var tile_size := Vector2(size.x / columns, size.y / rows)
	for k in range(copies.size()):
		copies[k].size = size
		_tiles[k].rect_position = Vector2(k % columns, k / columns) * tile_size
		_tiles[k].rect_size = tile_size
