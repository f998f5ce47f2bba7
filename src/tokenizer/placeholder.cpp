// placeholder: the tokenizer library is being written
