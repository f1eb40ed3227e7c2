# embed_sql.cmake - turns sql/NNN_name.sql into a C table of migrations.
#
# Run as: cmake -DSQL_DIR=... -DOUT=... [-DNAME=pt_pg_migrations] -P embed_sql.cmake
# The files are applied in the order of their number, and the numbers must
# run 1, 2, 3, ... without gaps: PRAGMA user_version is the last one applied.
if(NOT NAME)
  set(NAME pt_migrations)
endif()
file(GLOB files "${SQL_DIR}/[0-9][0-9][0-9]_*.sql")
list(SORT files)
set(body "/* Generated from the sql directory by cmake/embed_sql.cmake. Do not edit. */\n")
string(APPEND body "#include \"migrations.h\"\n\nconst struct pt_migration ${NAME}[] = {\n")
set(expect 1)
foreach(f IN LISTS files)
  get_filename_component(name "${f}" NAME)
  string(SUBSTRING "${name}" 0 3 num)
  math(EXPR num "${num}")
  if(NOT num EQUAL expect)
    message(FATAL_ERROR "sql/: expected migration ${expect}, found ${name}")
  endif()
  math(EXPR expect "${expect} + 1")
  file(READ "${f}" sql HEX)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "\\\\x\\1" sql "${sql}")
  # Break the literal every 64 bytes so compilers stay happy.
  string(REGEX REPLACE "((\\\\x[0-9a-f][0-9a-f]){64})" "\\1\"\n     \"" sql "${sql}")
  string(APPEND body "    {${num}, \"${name}\",\n     \"${sql}\"},\n")
endforeach()
string(APPEND body "};\n\nconst int ${NAME}_count = (int)(sizeof ${NAME} / sizeof ${NAME}[0]);\n")
file(WRITE "${OUT}.tmp" "${body}")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
