# Generates a .cpp defining kM2ChatTemplate from the .jinja file (raw string literal).
file(READ ${IN} CONTENT)
file(WRITE ${OUT} "// Generated from ${IN}; do not edit.\n#include \"model/m2_chat_template.h\"\nnamespace mmx {\nconst char* const kM2ChatTemplate = R\"MMXTPL(${CONTENT})MMXTPL\";\n}\n")
