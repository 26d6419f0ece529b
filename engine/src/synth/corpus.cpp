// The text synthetic vocabularies learn their first merges from: everyday English, some
// technical prose and a little code, so that common words, suffixes and code fragments
// become tokens the way they do in real vocabularies. Written for this purpose.
#include "synth/merge_learner.h"

namespace powerhouse::synth {

std::string_view training_corpus() {
    static constexpr std::string_view kText = R"CORPUS(
The morning was cold and clear, and the people of the town came out early to see the first snow of the year.
Children were running between the houses, and their parents stood at the doors with cups of hot tea.
It is the kind of day that you remember for a long time, because nothing happens and everything is quiet.
She said that she would come back in the evening, after the work was done and the shops were closed.
He wanted to know what they were thinking about, but nobody would tell him anything at all.
We have been waiting for this moment for many years, and now that it is here we are not sure what to do.
There are two ways to answer the question: you can think about it for a while, or you can simply ask again.
If you want to learn something new, the best thing to do is to start with a small problem and solve it.
They walked along the river until the sun was low, talking about their families, their friends and their plans.
The old man who lived next to the station had a garden full of flowers, and every spring he gave them away.
Some of the students were reading, some were writing, and some were looking out of the window at the rain.
When the train finally arrived, it was already dark, and the platform was almost empty except for a dog.
I think that the most important part of the story is the beginning, because it tells you where everyone stands.
You should always check the weather before going into the mountains, even in the middle of the summer.
Our team has worked hard on this project, and we are happy to share the results with the community today.
This information is provided for general purposes only and should not be used as professional advice.
Please contact us if you have any questions about the service, the price or the delivery of your order.
The government announced new rules for energy, health and education, which will take effect next year.
Researchers found that the number of species living in the region has changed significantly over time.
According to the report, the company increased its revenue by twenty percent during the first quarter.
Water boils at one hundred degrees, and the temperature of the room should stay between eighteen and twenty two.
Machine learning models are trained on large amounts of data, and their performance depends on the quality of it.
A language model predicts the next token from the previous tokens, one step at a time, using attention layers.
Each layer of the network applies a normalization, a projection of queries, keys and values, and a feed forward block.
The memory bandwidth of the device limits the speed of decoding, because every weight is read once per token.
To install the program, download the package, open a terminal and run the following command as a normal user.
The function returns an error when the file cannot be opened, when the header is invalid or when memory runs out.
Make sure that the configuration file exists and that the values of the settings are within the allowed range.
In this chapter we describe the design of the system, the structure of the data and the main algorithms we use.
The results of the experiment are shown in the table below, together with the standard deviation of each value.
History teaches us that great changes often begin with small actions taken by ordinary people in their daily lives.
The city is famous for its museums, its markets and its music, and thousands of visitors come here every summer.
Add the flour, the sugar and a pinch of salt, mix everything together and let the dough rest for thirty minutes.
What do you want to eat tonight? I could make some soup, or we could go to the restaurant around the corner.
Thank you very much for your help. I really appreciate the time you took to explain how everything works.
Hello! How are you doing today? I hope that you are well and that the weather is nice where you are.
Let me know if there is anything else I can do for you, and I will be glad to help you with it.

#include <cstdint>
#include <string>
#include <vector>

namespace example {

// Returns the sum of the values in the list.
int64_t sum_values(const std::vector<int64_t>& values) {
    int64_t total = 0;
    for (size_t i = 0; i < values.size(); ++i) {
        total += values[i];
    }
    return total;
}

class Counter {
public:
    explicit Counter(std::string name) : name_(std::move(name)) {}
    void increment() { ++count_; }
    int count() const { return count_; }
    const std::string& name() const { return name_; }

private:
    std::string name_;
    int count_ = 0;
};

}  // namespace example

import os
import sys
import json


def load_config(path):
    """Read the configuration file and return a dictionary."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such file: {path}")
    with open(path, "r", encoding="utf-8") as f:
        return json.load(f)


class Model:
    def __init__(self, name, layers=32, hidden_size=4096):
        self.name = name
        self.layers = layers
        self.hidden_size = hidden_size

    def forward(self, inputs):
        for layer in range(self.layers):
            inputs = self.apply_layer(layer, inputs)
        return inputs

    def __repr__(self):
        return f"Model(name={self.name!r}, layers={self.layers})"


if __name__ == "__main__":
    config = load_config(sys.argv[1])
    print(json.dumps(config, indent=2))

function updateList(items) {
  const list = document.getElementById("items");
  list.innerHTML = "";
  for (const item of items) {
    const element = document.createElement("li");
    element.textContent = item.title;
    list.appendChild(element);
  }
  return items.length;
}

{"name": "example", "version": "1.0.0", "description": "A small example", "private": true, "count": 42}
SELECT id, name, created_at FROM users WHERE active = 1 ORDER BY created_at DESC LIMIT 10;
)CORPUS";
    return kText;
}

}  // namespace powerhouse::synth
