# Generates a .cpp defining the embedded chat page (server/web_assets.h) from the files in DIR.
#   cmake -DDIR=src/server/web -DOUT=web_assets.cpp -P embed.cmake
# Each file becomes a raw string literal; index.html is served at "/", the others at "/NAME".
set(FILES index.html chat.js chat.css)
set(TYPES text/html text/javascript text/css)  # served with "; charset=utf-8"
set(BODY "// Generated from ${DIR} by embed.cmake; do not edit.\n#include \"server/web_assets.h\"\n\nnamespace mmx::server {\nnamespace {\nconst WebAsset kAssets[] = {\n")
foreach(i RANGE 2)
  list(GET FILES ${i} NAME)
  list(GET TYPES ${i} TYPE)
  file(READ ${DIR}/${NAME} CONTENT)
  string(FIND "${CONTENT}" ")MMXWEB\"" CLASH)
  if(NOT CLASH EQUAL -1)
    message(FATAL_ERROR "${DIR}/${NAME} contains the raw-string delimiter )MMXWEB\"")
  endif()
  if(NAME STREQUAL "index.html")
    set(URL "/")
  else()
    set(URL "/${NAME}")
  endif()
  string(APPEND BODY "    {\"${URL}\", \"${TYPE}; charset=utf-8\", R\"MMXWEB(${CONTENT})MMXWEB\"},\n")
endforeach()
string(APPEND BODY "};\n}  // namespace\n\nconst WebAsset* web_assets_begin() { return kAssets; }\nconst WebAsset* web_assets_end() { return kAssets + sizeof kAssets / sizeof kAssets[0]; }\n\nconst WebAsset* find_web_asset(std::string_view path) {\n  for (const WebAsset& a : kAssets)\n    if (path == a.path) return &a;\n  return nullptr;\n}\n\n}  // namespace mmx::server\n")
file(WRITE ${OUT} "${BODY}")
