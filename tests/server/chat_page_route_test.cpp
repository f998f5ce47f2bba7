// The chat page's routes (GET /, /chat.js, /chat.css) without a browser: served byte-identical
// to src/server/web/ without the API key while the API still needs it, the wrong method is a
// 405, and the page references nothing but this server's own routes (it must work offline).
// The page's behaviour in a browser is chat_page_test.sh.
#include <algorithm>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "server/web_assets.h"
#include "server_fixture.h"

namespace mmx::server {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f) << path;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string file_for(const std::string& url_path) {
  return std::string(MMX_SOURCE_DIR) + "/src/server/web/" + (url_path == "/" ? "index.html" : url_path.substr(1));
}

TEST_F(ServerTest, ChatPageIsServedWithoutTheKeyAndMatchesItsFiles) {
  opts.api_keys = {"sekrit"};
  start();
  httplib::Client c("127.0.0.1", port);
  int n = 0;
  for (const WebAsset* a = web_assets_begin(); a != web_assets_end(); ++a, ++n) {
    auto r = c.Get(a->path);
    ASSERT_TRUE(r) << a->path;
    EXPECT_EQ(r->status, 200) << a->path;
    EXPECT_EQ(r->get_header_value("Content-Type"), a->content_type) << a->path;
    EXPECT_EQ(r->body, read_file(file_for(a->path))) << a->path << " differs from its file";
  }
  EXPECT_EQ(n, 3);
  EXPECT_EQ(c.Get("/?lang=en")->status, 200);  // a query string does not change the route
  EXPECT_EQ(c.Get("/", {{"Authorization", "Bearer wrong"}})->status, 200);
  expect_error(c.Get("/v1/models"), 401, "the API still needs the key");
  expect_error(c.Get("/index.html"), 401, "only the page's own paths are open");
  auto post = c.Post("/", {{"Authorization", "Bearer sekrit"}}, "{}", "application/json");
  expect_error(post, 405, "POST /");
  EXPECT_EQ(post->get_header_value("Allow"), "GET");
  EXPECT_EQ(find_web_asset("/chat.js")->body, read_file(file_for("/chat.js")));
  EXPECT_EQ(find_web_asset("/nope"), nullptr);
}

TEST(ChatPage, ReferencesOnlyItsOwnRoutes) {
  const std::string html(find_web_asset("/")->body), js(find_web_asset("/chat.js")->body);
  // Every src= / href= of the page is one of the embedded assets.
  const std::regex ref(R"re((?:src|href)="([^"]*)")re");
  std::set<std::string> refs;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), ref); it != std::sregex_iterator(); ++it) {
    refs.insert((*it)[1]);
    EXPECT_NE(find_web_asset((*it)[1].str()), nullptr) << (*it)[1] << " is not served by this server";
  }
  EXPECT_EQ(refs, (std::set<std::string>{"/chat.css", "/chat.js"}));
  // No absolute URL anywhere (no CDN, no fonts): only same-origin paths.
  for (const WebAsset* a = web_assets_begin(); a != web_assets_end(); ++a) {
    const std::string body(a->body);
    EXPECT_EQ(body.find("http://"), std::string::npos) << a->path;
    EXPECT_EQ(body.find("https://"), std::string::npos) << a->path;
    EXPECT_EQ(body.find("@import"), std::string::npos) << a->path;
  }
  // The script calls only the API routes (by their path) and nothing else.
  const std::regex call(R"re(fetch\('([^']*)')re");
  std::set<std::string> calls;
  for (auto it = std::sregex_iterator(js.begin(), js.end(), call); it != std::sregex_iterator(); ++it) calls.insert((*it)[1]);
  EXPECT_EQ(calls, (std::set<std::string>{"/v1/chat/completions", "/v1/models"}));
  EXPECT_EQ(std::count(js.begin(), js.end(), '\0'), 0);
}

}  // namespace
}  // namespace mmx::server
