// mmx chat-template — placeholder until the template engine lands.
#include "base/error.h"
#include "common.h"

namespace mmx::cli {

void add_chat_template(CLI::App& app, Action& action) {
  app.add_subcommand("chat-template", "Render a chat template (not available yet)")->callback([&action] {
    action = [] { fail("mmx chat-template: the template engine is not part of this build yet"); };
  });
}

}  // namespace mmx::cli
