extends Reference
# What a call that can fail gives back: a value to go on with, or how the run ends and why.
#
# The addon never tells an error from a value by its type, nor one ending from another by comparing
# strings: a call that can fail returns a Result, and its `kind` says which. GO_ON carries `value`
# (or nothing) and the run goes on; WAIT goes on too, but the reply is due in the next frame (a
# reset that cameras must see first). Every other kind ends the run, and RLSync (sync.gd) reports it
# by kind:
#   DONE          the mode's work is over (an evaluation, a benchmark, --policy_forward's outputs)
#   CLOSED        the trainer sent "close"
#   DISCONNECTED  the trainer is gone, or its stream ended inside a message
#   BUSY          the trainer on the editor port trains another game (trainer_handshake.gd)
#   FAILED        something is wrong; `message` says what and how to fix it
#
# Constructors are static, so a caller writes `Result.failed("...")`; they load() this file because
# a script cannot preload itself in Godot 3.

const PATH := "res://addons/rl_sync/result.gd"
const DISCONNECTED_TEXT := "the trainer disconnected; quitting"
const CLOSED_TEXT := "the trainer closed the session"

enum Kind { GO_ON, WAIT, DONE, CLOSED, DISCONNECTED, BUSY, FAILED }

var kind: int = Kind.GO_ON
var value = null
var message := ""


func _init(kind_: int = Kind.GO_ON, value_ = null, message_: String = "") -> void:
	kind = kind_
	value = value_
	message = message_


static func go_on(value_ = null) -> Reference:
	return load(PATH).new(Kind.GO_ON, value_)


static func wait() -> Reference:
	return load(PATH).new(Kind.WAIT)


static func done() -> Reference:
	return load(PATH).new(Kind.DONE)


static func closed() -> Reference:
	return load(PATH).new(Kind.CLOSED, null, CLOSED_TEXT)


static func disconnected() -> Reference:
	return load(PATH).new(Kind.DISCONNECTED, null, DISCONNECTED_TEXT)


static func busy(message_: String) -> Reference:
	return load(PATH).new(Kind.BUSY, null, message_)


static func failed(message_: String) -> Reference:
	return load(PATH).new(Kind.FAILED, null, message_)


# Whether the run goes on (GO_ON or WAIT): anything else is passed up to RLSync, which ends the run.
func goes_on() -> bool:
	return kind == Kind.GO_ON or kind == Kind.WAIT


# Whether this is a failure, with a message for the user.
func is_failure() -> bool:
	return kind == Kind.FAILED
