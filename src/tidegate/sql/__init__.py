"""The only place SQL text is made: sqlglot expressions, quoting and transpiling."""

from tidegate.sql.nesting import make_room

# sqlglot recurses once per level of nesting: wherever tidegate parses or writes SQL (loading
# a project, building, executing), SQL nested up to nesting.MAX_DEPTH must have the room
make_room()
