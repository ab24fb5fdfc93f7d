// Puts a token, takes it and acks it with a new one: the installed client works.
#include <iostream>

#include "client/client.h"

int main(int argc, char** argv) {
    if (argc != 2) {
        std::cerr << "usage: refresher_outside HOST:PORT\n";
        return 2;
    }
    dueq::client::ClientOptions opts;
    opts.seeds = {argv[1]};
    dueq::client::Client c(opts);
    dueq::client::PutRequest put;
    put.queue = "outside";
    put.key = "token-1";
    put.payload = "\xa2t1";  // msgpack "t1"
    put.time = 0;
    if (auto r = c.put(put); !r.ok()) {
        std::cerr << "put: " << r.error().to_string() << "\n";
        return 1;
    }
    dueq::client::TakeRequest take;
    take.queue = "outside";
    auto t = c.take(take);
    if (!t.ok() || t->tasks.size() != 1) {
        std::cerr << "take: " << (t.ok() ? "no task" : t.error().to_string()) << "\n";
        return 1;
    }
    dueq::client::AckRequest ack;
    ack.queue = "outside";
    ack.key = t->tasks[0].key;
    ack.lease = t->tasks[0].lease;
    if (auto r = c.ack(ack); !r.ok()) {
        std::cerr << "ack: " << r.error().to_string() << "\n";
        return 1;
    }
    std::cout << "refreshed " << ack.key << " through the installed client\n";
    return 0;
}
